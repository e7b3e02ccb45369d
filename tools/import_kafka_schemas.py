#!/usr/bin/env python3
"""Converts Apache Kafka's JSON message definitions into Brook's schema files.

Usage: tools/import_kafka_schemas.py OUT_DIR GROUP=SRC_DIR [GROUP=SRC_DIR ...]

Each SRC_DIR holds Kafka's `*.json` definitions (JSON with // comments). For
each one, OUT_DIR/GROUP/<Name>.json is written in Brook's schema format (see
net/schemas/README.md): wire facts only -- names, types, version ranges,
nullability, tags, defaults, map keys. Documentation strings, comments and
entity annotations are dropped.
"""
import json
import os
import re
import sys

KIND = {"request": "request", "response": "response", "header": "header",
        "data": "data", "metadata": "record"}


def strip_comments(text):
    out = []
    for line in text.splitlines():
        in_string = False
        cut = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == '"' and (i == 0 or line[i - 1] != '\\'):
                in_string = not in_string
            elif not in_string and line.startswith("//", i):
                cut = i
                break
            i += 1
        out.append(line[:cut])
    return "\n".join(out)


def parse_default(kafka_type, value):
    if value is None:
        return None
    text = str(value).strip()
    if text in ("null", "None"):
        return None
    if kafka_type == "bool":
        return text.lower() == "true"
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(text, 0)
    if kafka_type == "float64":
        return float(text)
    return text


def convert_field(f):
    out = {"name": f["name"], "type": f["type"]}
    versions = f.get("versions", f.get("taggedVersions"))
    out["versions"] = versions
    if "nullableVersions" in f:
        out["nullable"] = f["nullableVersions"]
    if "taggedVersions" in f:
        out["tagged"] = f["taggedVersions"]
        out["tag"] = int(f["tag"])
    if "flexibleVersions" in f:
        out["flexible"] = f["flexibleVersions"]
    if "default" in f:
        out["default"] = parse_default(f["type"], f["default"])
    if f.get("ignorable") in (True, "true"):
        out["ignorable"] = True
    if f.get("mapKey") in (True, "true"):
        out["map_key"] = True
    if f.get("zeroCopy") in (True, "true"):
        out["zero_copy"] = True
    if "fields" in f:
        out["fields"] = [convert_field(x) for x in f["fields"]]
    return out


def convert(doc):
    out = {"name": doc["name"], "kind": KIND[doc["type"]]}
    if "apiKey" in doc:
        out["api_key"] = doc["apiKey"]
    out["versions"] = doc["validVersions"]
    out["flexible"] = doc["flexibleVersions"]
    if "deprecatedVersions" in doc:
        out["deprecated"] = doc["deprecatedVersions"]
    if doc.get("latestVersionUnstable"):
        out["unstable_latest"] = True
    if "listeners" in doc:
        out["listeners"] = sorted(doc["listeners"])
    out["fields"] = [convert_field(f) for f in doc["fields"]]
    if doc.get("commonStructs"):
        out["structs"] = [{"name": s["name"], "versions": s["versions"],
                           "fields": [convert_field(f) for f in s["fields"]]}
                          for s in doc["commonStructs"]]
    return out


def dump(value, indent=""):
    """JSON with one field per line: short objects stay on one line."""
    flat = json.dumps(value)
    if len(flat) + len(indent) <= 100 or not isinstance(value, (dict, list)):
        return flat
    inner = indent + "  "
    if isinstance(value, list):
        items = [inner + dump(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [inner + json.dumps(k) + ": " + dump(v, inner) for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_dir = argv[1]
    for spec in argv[2:]:
        group, src = spec.split("=", 1)
        os.makedirs(os.path.join(out_dir, group), exist_ok=True)
        for name in sorted(os.listdir(src)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(src, name)) as f:
                doc = json.loads(strip_comments(f.read()))
            converted = convert(doc)
            # Named after the message (a few of Kafka's files are not).
            with open(os.path.join(out_dir, group, converted["name"] + ".json"), "w") as f:
                f.write(dump(converted) + "\n")


if __name__ == "__main__":
    main(sys.argv)
