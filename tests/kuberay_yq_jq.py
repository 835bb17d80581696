"""`yq -i "(select(document_index == N) | PATH) OP VALUE" FILE` done by jq: the kuberay fixes' tests run the pasted
text in bash with this standing for yq v4, so the expressions (written in the subset jq shares with yq v4) really
edit the manifest. jq gets one document; the others are written back as they were."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml


def main(argv: list[str]) -> int:
    assert argv[0] == "-i", f"the fixes edit in place: {argv}"
    expr, path = argv[1], argv[2]
    match = re.fullmatch(r"\(select\(document_index == (\d+)\) \| (.+?)\) (\+=|=) (.+)", expr, re.S)
    assert match, f"not a kuberay fix expression: {expr}"
    index, target, op, value = int(match.group(1)), match.group(2), match.group(3), match.group(4)
    with open(path) as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d is not None]
    out = subprocess.run(["jq", "-c", f"({target}) {op} {value}"], input=json.dumps(docs[index]), text=True,
                         capture_output=True, timeout=30, check=True).stdout
    docs[index] = json.loads(out)
    with open(path, "w") as fh:
        yaml.safe_dump_all(docs, fh, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
