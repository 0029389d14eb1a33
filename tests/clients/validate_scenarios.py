"""Every conformance scenario (conformance/*.json) against its JSON Schema (Draft 2020-12), with
the jsonschema package: the format the runner reads and the one the schema documents agree.
A schema that accepts a broken scenario is caught too: each check is also tried on a copy with a
misspelt key, which must be refused."""

import copy
import json
import pathlib
import sys

import jsonschema

folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "conformance")
schema = json.loads((folder / "scenario.schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
scenarios = sorted(p for p in folder.glob("*.json") if not p.name.endswith(".schema.json"))
failed = 0
for path in scenarios:
    scenario = json.loads(path.read_text())
    errors = [e.message for e in validator.iter_errors(scenario)]
    misspelt = copy.deepcopy(scenario)
    misspelt["steps"][0]["expext"] = misspelt["steps"][0].pop("expect", {})
    if errors or validator.is_valid(misspelt):
        failed += 1
        print(f"{path.name}: {errors or 'a misspelt key passes the schema'}")
print(f"{len(scenarios) - failed} of {len(scenarios)} scenarios match conformance/scenario.schema.json")
sys.exit(1 if failed or not scenarios else 0)
