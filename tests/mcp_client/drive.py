"""Drives memd's MCP tools with the official Python MCP SDK and prints what happened as JSON.

Run by tests/tests/mcp.rs; it judges the report. This script only performs the calls and
records, for each labelled call, the tool result (text and isError) or the protocol error.

  drive.py --transport http --url http://127.0.0.1:PORT/mcp --token TOKEN --mode legacy --scenario full
  drive.py --transport stdio --memd /path/to/memd --mode legacy --scenario full
"""

import argparse
import asyncio
import json
import logging
import os
import re
import sys

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

ID_RE = re.compile(r"\[id:([a-z_]+_[0-9a-f]+)\]")


class Recorder:
    def __init__(self, client):
        self.client = client
        self.calls = {}

    async def call(self, label, tool, arguments):
        try:
            result = await self.client.call_tool(tool, arguments)
            text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
            self.calls[label] = {"is_error": bool(result.is_error), "text": text}
        except MCPError as e:
            self.calls[label] = {"protocol_error": str(e)}
        return self.calls[label]


def first_id(entry, prefix):
    for found in ID_RE.findall(entry.get("text", "")):
        if found.startswith(prefix):
            return found
    return None


async def full(rec, tag):
    fact = f"The user's name is Ada Lovelace and she prefers concise answers ({tag})"
    added = await rec.call("add_ok", "add_to_memory_bank",
                           {"content": fact, "tags": ["identity"], "importance": 0.9, "confidence": 0.8})
    bank_id = first_id(added, "memory_bank_") or "memory_bank_000000000000"
    await rec.call("add_bad_importance", "add_to_memory_bank", {"content": "x " + tag, "importance": 1.5})
    await rec.call("add_missing_content", "add_to_memory_bank", {"tags": ["x"]})
    await rec.call("add_wrong_type", "add_to_memory_bank", {"content": "y " + tag, "importance": "high"})

    await rec.call("search_query", "search_memory", {"query": f"Ada Lovelace concise answers {tag}"})
    await rec.call("search_none", "search_memory", {})
    await rec.call("search_limit_high", "search_memory", {"query": "x", "limit": 50})
    await rec.call("search_limit_type", "search_memory", {"query": "x", "limit": "ten"})
    await rec.call("search_days_bad", "search_memory", {"days_back": 0})
    await rec.call("search_days", "search_memory", {"days_back": 1, "limit": 20})
    await rec.call("search_id", "search_memory", {"id": bank_id})
    await rec.call("search_id_missing", "search_memory", {"id": "memory_bank_000000000000"})
    await rec.call("search_sort_bad", "search_memory", {"query": "x", "sort_by": "newest"})
    await rec.call("search_collection_bad", "search_memory", {"query": "x", "collections": ["notes"]})
    await rec.call("search_unknown_arg", "search_memory", {"query": "x", "days": 3})
    await rec.call("search_metadata_bad", "search_memory", {"query": "x", "metadata": {"a": {"$regex": "y"}}})

    await rec.call("update_ok", "update_memory", {"id": bank_id, "confidence": 0.6})
    await rec.call("update_nothing", "update_memory", {"id": bank_id})
    await rec.call("update_missing", "update_memory", {"id": "memory_bank_000000000000", "confidence": 0.5})
    await rec.call("update_bad_confidence", "update_memory", {"id": bank_id, "confidence": -1})

    for i in range(1, 6):
        await rec.call(f"context_{i}", "get_context_insights", {"query": f"What is the user's name? Ada Lovelace {tag}"})

    await rec.call("record_ok", "record_response",
                   {"key_takeaway": f"Deploys need the staging flag set first ({tag})", "initial_score": "worked"})
    await rec.call("record_bad", "record_response", {"key_takeaway": "x", "initial_score": "great"})
    await rec.call("record_empty", "record_response", {"key_takeaway": "   "})

    await rec.call("score_bad", "score_response", {"outcome": "excellent"})
    await rec.call("score_bad_memory", "score_response", {"outcome": "worked", "memory_scores": {bank_id: "meh"}})

    await rec.call("archive_none", "archive_memory", {})
    await rec.call("delete_ok", "delete_memory", {"id": bank_id})
    await rec.call("search_after_delete", "search_memory", {"query": f"Ada Lovelace concise answers {tag}"})
    await rec.call("delete_missing", "delete_memory", {"id": "memory_bank_000000000000"})
    await rec.call("unknown_tool", "forget_everything", {})
    return {"bank_id": bank_id}


async def score(rec, tag):
    # What get_context_insights shows is scored with the exchange when `related` is left out.
    await rec.call("context", "get_context_insights", {"query": tag})
    await rec.call("score", "score_response", {"outcome": "worked"})
    await rec.call("score_again", "score_response", {"outcome": "worked"})
    return {}


async def smoke(rec, tag):
    await rec.call("search_days", "search_memory", {"days_back": 1})
    return {}


async def restart(rec, tag):
    """Calls, then waits (the test restarts or stops the daemon meanwhile), then calls again."""
    fact = f"The user works on the billing service ({tag})"
    added = await rec.call("add_before", "add_to_memory_bank", {"content": fact})
    print(PAUSE_MARKER, file=sys.stderr, flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)
    await rec.call("search_after", "search_memory", {"query": f"billing service {tag}"})
    await rec.call("context_after", "get_context_insights", {"query": f"billing service {tag}"})
    return {"bank_id": first_id(added, "memory_bank_")}


PAUSE_MARKER = "drive.py: paused, press enter"
SCENARIOS = {"full": full, "score": score, "smoke": smoke, "restart": restart}


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--transport", choices=["http", "stdio"], required=True)
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--memd")
    p.add_argument("--mode", default="legacy")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="full")
    p.add_argument("--tag", default="run")
    a = p.parse_args()

    if a.transport == "http":
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {a.token}"})
        server = streamable_http_client(a.url, http_client=http)
    else:
        http = None
        server = StdioServerParameters(command=a.memd, args=["mcp"], env=dict(os.environ))

    report = {}
    try:
        async with Client(server, mode=a.mode, cache=None) as client:
            report["protocol_version"] = client.protocol_version
            report["instructions"] = client.instructions
            listed = await client.list_tools()
            report["tools"] = [
                {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                for t in listed.tools
            ]
            rec = Recorder(client)
            report["extra"] = await SCENARIOS[a.scenario](rec, a.tag)
            report["calls"] = rec.calls
    finally:
        if http is not None:
            await http.aclose()
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    asyncio.run(main())
