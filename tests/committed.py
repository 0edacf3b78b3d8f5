"""Committed results copied into a test's own repository root: a test decides which results are committed."""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def commit(root: Path, name: str, dest: str | None = None, methods=None) -> Path:
    """Copy ``results/<name>.json`` of this checkout to ``root/results/<dest or name>.json``, keeping only the runs
    of ``methods`` (and naming just those in its setting) where given."""
    result = json.loads((ROOT / f"results/{name}.json").read_text())
    if methods is not None:
        result["runs"] = [r for r in result["runs"] if r["method"] in methods]
        result["config"]["methods"] = list(methods)
    path = Path(root) / f"results/{dest or name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    return path
