#!/usr/bin/env python3
"""Grows a copy of the Roampal fixture store to N working memories, for timing
`memd import --from-roampal` on a large store.

    python3 bench/roampal/grow_store.py OUT_DIR [N]

Copies tests/fixtures/roampal/store/data to OUT_DIR/data and adds N rows to
roampal_working the way Roampal lays them out (one `embeddings` row, its metadata rows:
the document, score, uses, outcome history, noun tags, times). Only the tables memd reads
are filled: Roampal itself would not open the result (no vectors, no full-text rows).
Stdlib only; the texts are varied enough that memd stores every one (no duplicates).
"""
import json
import os
import random
import shutil
import sqlite3
import sys

WORDS = ("billing search ingest gateway scheduler ledger auth cache queue exporter "
         "postgres redis kafka nginx cargo pytest docker helm terraform grafana "
         "timeout retry migration index deadlock flaky snapshot rollback backfill").split()


def main():
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "..", "tests", "fixtures", "roampal", "store", "data")
    data = os.path.join(out, "data")
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(src, data)
    db = sqlite3.connect(os.path.join(data, "chromadb", "chroma.sqlite3"))
    seg = db.execute(
        "SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id "
        "WHERE c.name = 'roampal_working' AND s.scope = 'METADATA'").fetchone()[0]
    seq = db.execute("SELECT coalesce(max(seq_id), 0) FROM embeddings_queue").fetchone()[0]
    rng = random.Random(7)
    for i in range(n):
        seq += 1
        words = rng.sample(WORDS, 6)
        doc = (f"Exchange {i}: the {words[0]} service failed on {words[1]} until the "
               f"{words[2]} {words[3]} was fixed; {words[4]} and {words[5]} were checked.")
        rid = f"working_{i:08x}"
        cur = db.execute(
            "INSERT INTO embeddings (segment_id, embedding_id, seq_id) VALUES (?, ?, ?)",
            (seg, rid, seq))
        row = cur.lastrowid
        day = 1 + i % 28
        when = f"2026-10-{day:02d}T{i % 24:02d}:{i % 60:02d}:00.{i % 1000000:06d}"
        history = [{"outcome": rng.choice(["worked", "partial", "failed"]),
                    "timestamp": when, "reason": None} for _ in range(i % 4)]
        meta = {
            "chroma:document": doc, "content": doc, "text": doc,
            "score": round(rng.random(), 2), "uses": len(history),
            "created_at": when, "conversation_id": f"conv-{i % 97}",
            "memory_type": "exchange_summary",
            "noun_tags": json.dumps(words[:3]),
            "outcome_history": json.dumps(history),
        }
        if history:
            meta["last_outcome"] = history[-1]["outcome"]
            meta["last_used"] = when
        for k, v in meta.items():
            col = ("int_value" if isinstance(v, int) else
                   "float_value" if isinstance(v, float) else "string_value")
            db.execute(f"INSERT INTO embedding_metadata (id, key, {col}) VALUES (?, ?, ?)",
                       (row, k, v))
    db.commit()
    print(f"{n} working memories added to {data}")


if __name__ == "__main__":
    main()
