"""Check an Airlock audit export (`format=audit`) without Airlock: `python verify_audit_export.py audit.jsonl`.

Needs only `pip install rfc8785 cryptography`. Pass the deployment's public key, obtained from its operators
by a channel other than the export itself, with `--public-key key.pem`; without it the export's own key is
used, which proves the export is intact but not who signed it. Exit status 0 when everything verifies.
"""

import argparse
import base64
import hashlib
import json
import sys
from pathlib import Path

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import load_pem_public_key


def sha256_of(value) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def check(lines, public_pem: str | None) -> list[str]:
    problems, heads, prev, expected_seq, key = [], {}, None, 1, None
    for number, line in enumerate(lines, 1):
        record = json.loads(line)
        kind = record.get("type")
        if kind == "key":
            key = load_pem_public_key((public_pem or record["public_key_pem"]).encode())
            prev = record["genesis"]
        elif kind == "link":
            where = f"link #{record['seq']} ({record['log']} row {record['row']})"
            if record["seq"] != expected_seq or record["prev_sha256"] != prev:
                problems.append(f"{where}: the chain is broken before it (a link was removed or rewritten)")
            body = {
                "tenant": record["tenant"],
                "seq": record["seq"],
                "log": record["log"],
                "row": record["row"],
                "content": record["content_sha256"],
                "prev": record["prev_sha256"],
            }
            if sha256_of(body) != record["sha256"]:
                problems.append(f"{where}: the link was edited")
            if record["content"] is not None and sha256_of(record["content"]) != record["content_sha256"]:
                problems.append(f"{where}: the row's content does not match its hash")
            if record["content"] is None and not record["removed"]:
                problems.append(f"{where}: the row is missing")
            heads[record["seq"]] = record["sha256"]
            prev, expected_seq = record["sha256"], record["seq"] + 1
        elif kind == "checkpoint":
            signed = record["signed"]
            try:
                key.verify(base64.b64decode(record["signature"]), rfc8785.dumps(signed))
            except (InvalidSignature, ValueError):
                problems.append(f"checkpoint of link #{signed['seq']}: bad signature")
                continue
            if heads.get(signed["seq"]) != signed["sha256"]:
                problems.append(f"checkpoint of link #{signed['seq']}: the chain does not reach it unchanged")
        elif kind is None:
            problems.append(f"line {number}: not an audit record")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export")
    parser.add_argument("--public-key", help="The deployment's Ed25519 public key (PEM file).")
    args = parser.parse_args()
    public_pem = Path(args.public_key).read_text() if args.public_key else None
    with open(args.export) as lines:
        problems = check(lines, public_pem)
    for problem in problems:
        print("FAIL", problem)
    print("OK" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
