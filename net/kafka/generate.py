#!/usr/bin/env python3
"""Generates C++ for Brook's Kafka message schemas (net/schemas/*/*.json).

Usage: generate.py OUT_DIR SHARDS TEST_SHARDS SCHEMA.json...

Writes, under OUT_DIR/net/kafka/:
  messages/<snake_name>.h   one struct per message (nested structs inside)
  messages.h                includes every message header
  messages_<i>.cc           the encode/decode/size/format code, in SHARDS files
  apis.h, apis.cc           the API key table and per-key type dispatch
  testing.h, testing_<i>.cc random instances and round-trip checks (tests only)

The schema format is described in net/schemas/README.md.
"""
import json
import os
import re
import sys

INF = 0x7FFF

FIXED = {
    "int8": ("int8_t", 1, "i8"),
    "int16": ("int16_t", 2, "i16"),
    "int32": ("int32_t", 4, "i32"),
    "int64": ("int64_t", 8, "i64"),
    "uint16": ("uint16_t", 2, "u16"),
    "uint32": ("uint32_t", 4, "u32"),
    "float64": ("double", 8, "f64"),
    "bool": ("bool", 1, "boolean"),
    "uuid": ("Uuid", 16, "uuid"),
}
RESERVED = {"measure", "write", "read", "append_to", "unknown_tags", "v", "version"}


def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", s)
    s = s.lower()
    return s + "_" if s in RESERVED else s


def parse_range(text):
    """'3+', '0-2', '5', 'none' -> (lo, hi) or None."""
    if text is None or text == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return (int(text[:-1]), INF)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def intersect(a, b):
    if a is None or b is None:
        return None
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else None


def cond(rng, valid):
    """C++ condition for `v` within rng, given v within valid. None = always."""
    r = intersect(rng, valid)
    if r is None:
        return "false"
    parts = []
    if r[0] > valid[0]:
        parts.append(f"v >= {r[0]}")
    if r[1] < valid[1]:
        parts.append(f"v <= {r[1]}")
    return " && ".join(parts) if parts else None


def guard(c, body, indent):
    if c is None:
        return body
    if c == "false":
        return []
    out = [f"{indent}if ({c}) {{"]
    out += ["  " + line for line in body]
    out.append(f"{indent}}}")
    return out


class Field:
    def __init__(self, spec, msg):
        self.spec = spec
        self.name = spec["name"]
        self.member = snake(self.name)
        self.type = spec["type"]
        self.versions = parse_range(spec.get("versions"))
        self.nullable = parse_range(spec.get("nullable"))
        self.tagged = parse_range(spec.get("tagged"))
        self.tag = spec.get("tag")
        self.flexible = parse_range(spec.get("flexible", "0+"))
        self.ignorable = spec.get("ignorable", False)
        self.zero_copy = spec.get("zero_copy", False) or self.type == "records"
        self.has_default = "default" in spec
        self.default = spec.get("default")
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.is_struct = self.elem not in FIXED and self.elem not in ("string", "bytes", "records")
        self.struct_name = self.elem if self.is_struct else None
        if (self.is_struct and not self.is_array and self.nullable is not None
                and intersect(self.versions, msg.valid) != intersect(intersect(self.versions, self.nullable), msg.valid)):
            raise SystemExit(f"{msg.name}.{self.name}: struct nullable in only some versions")
        if self.is_struct and self.struct_name == msg.name:
            raise SystemExit(f"{msg.name}: struct named like its message")

    def optional(self):
        """Held as std::optional: nullable strings/bytes/records/structs/arrays."""
        if self.nullable is None:
            return False
        return self.is_array or self.elem in ("string", "bytes", "records") or self.is_struct

    def elem_cpp(self):
        if self.elem in FIXED:
            return FIXED[self.elem][0]
        if self.elem == "string":
            return "std::string"
        if self.elem in ("bytes", "records"):
            return "io::Buffer"
        return self.struct_name

    def cpp_type(self):
        t = self.elem_cpp()
        if self.is_array:
            t = f"std::vector<{t}>"
        if self.optional():
            t = f"std::optional<{t}>"
        return t

    def default_expr(self):
        """Initializer text for the member, or '' for value-initialisation."""
        if self.optional():
            if (self.has_default and self.default is None) or self.elem == "records":
                return "std::nullopt"
            if self.elem == "string" and self.has_default and self.default:
                return "std::in_place, " + json.dumps(self.default)
            return "std::in_place"
        if self.is_array or self.is_struct:
            return ""
        d = self.default
        if self.elem == "bool":
            return "true" if d is True else ("false" if self.has_default else "")
        if self.elem in ("int8", "int16", "int32", "uint16", "uint32"):
            if not self.has_default:
                return ""
            if d == -2147483648:
                return "INT32_MIN"
            return str(d)
        if self.elem == "int64":
            if not self.has_default:
                return ""
            return f"int64_t{{{d}}}"
        if self.elem == "float64":
            return repr(float(d)) if self.has_default else ""
        if self.elem == "string":
            if self.has_default and d:
                return json.dumps(d)
            return ""
        return ""

    def default_value_expr(self):
        init = self.default_expr()
        t = self.cpp_type()
        if init == "":
            return f"{t}{{}}"
        if init == "std::nullopt":
            return f"{t}{{std::nullopt}}"
        return f"{t}{{{init}}}"


class Struct:
    def __init__(self, name, fields, msg):
        self.name = name
        self.fields = [Field(f, msg) for f in fields]
        self.msg = msg


class Message:
    def __init__(self, spec, group):
        self.spec = spec
        self.group = group
        self.name = spec["name"]
        self.kind = spec["kind"]
        self.api_key = spec.get("api_key")
        self.valid = parse_range(spec["versions"])
        self.flex = parse_range(spec["flexible"])
        self.listeners = spec.get("listeners", [])
        self.deprecated = parse_range(spec.get("deprecated"))
        self.unstable = spec.get("unstable_latest", False)
        self.file = snake(self.name).rstrip("_")
        self.structs = {}  # name -> Struct
        self.order = []  # dependency order
        common = {s["name"]: s for s in spec.get("structs", [])}
        self.top = Struct(self.name, spec["fields"], self)
        self._collect(self.top.fields, common)
        self.flexible_any = intersect(self.flex, self.valid) is not None

    def _collect(self, fields, common):
        for f in fields:
            if not f.is_struct:
                continue
            if f.struct_name in self.structs:
                continue
            if "fields" in f.spec:
                s = Struct(f.struct_name, f.spec["fields"], self)
            elif f.struct_name in common:
                s = Struct(f.struct_name, common[f.struct_name]["fields"], self)
            else:
                raise SystemExit(f"{self.name}: unknown struct {f.struct_name}")
            self.structs[s.name] = s
            self._collect(s.fields, common)
            self.order.append(s)

    def flex_expr(self):
        r = intersect(self.flex, self.valid)
        if r is None:
            return "false"
        c = cond(r, self.valid)
        return "true" if c is None else f"({c})"


# --- code emission ----------------------------------------------------------


class Emitter:
    def __init__(self, msg):
        self.msg = msg
        self.valid = msg.valid

    def compact(self, f):
        """C++ expression: is this field's encoding compact at v?"""
        fr = intersect(self.msg.flex, f.flexible) if f.flexible is not None else None
        if fr is None:
            return "false"
        c = cond(fr, self.valid)
        return "true" if c is None else f"({c})"

    def nullable_cond(self, f):
        """C++ condition for null being allowed at v."""
        if f.nullable is None:
            return "false"
        c = cond(f.nullable, self.valid)
        return "true" if c is None else c

    def inline_range(self, f):
        """Versions in which the field is written inline (not tagged)."""
        if f.tagged is not None:
            return None
        return f.versions

    def tagged_range(self, f):
        if f.tagged is None:
            return None
        return intersect(intersect(f.tagged, f.versions or f.tagged), self.msg.flex)

    # -- measure --
    def measure_value(self, f, x, c, out, ind, sizer="s"):
        """Code adding the size of value `x` (of f's type) to `sizer`."""
        e = f.elem
        if f.is_array:
            inner = x + "->" if f.optional() else x + "."
            body = []
            if f.optional():
                out.append(f"{ind}if (!{x}) {{")
                out.append(f"{ind}  {sizer}.bytes += array_size(-1, {c});")
                out.append(f"{ind}}} else {{")
                ind2 = ind + "  "
            else:
                ind2 = ind
            body.append(f"{ind2}{sizer}.bytes += array_size(static_cast<int64_t>({inner}size()), {c});")
            if e in FIXED:
                body.append(f"{ind2}{sizer}.bytes += {FIXED[e][1]} * {inner}size();")
            else:
                body.append(f"{ind2}for (const auto& e : {'*' + x if f.optional() else x}) {{")
                self.measure_elem(f, "e", c, body, ind2 + "  ", sizer)
                body.append(f"{ind2}}}")
            out.extend(body)
            if f.optional():
                out.append(f"{ind}}}")
            return
        if f.optional():
            if f.is_struct:
                out.append(f"{ind}{sizer}.bytes += 1;")
                out.append(f"{ind}if ({x}) {x}->measure({sizer}, v);")
                return
            out.append(f"{ind}if (!{x}) {{")
            out.append(f"{ind}  {sizer}.bytes += {'string_size' if e == 'string' else 'bytes_size'}(-1, {c});")
            out.append(f"{ind}}} else {{")
            self.measure_elem(f, "(*" + x + ")", c, out, ind + "  ", sizer)
            out.append(f"{ind}}}")
            return
        self.measure_elem(f, x, c, out, ind, sizer)

    def measure_elem(self, f, x, c, out, ind, sizer="s"):
        e = f.elem
        if e in FIXED:
            out.append(f"{ind}{sizer}.bytes += {FIXED[e][1]};")
        elif e == "string":
            out.append(f"{ind}{sizer}.bytes += string_size(static_cast<int64_t>({x}.size()), {c});")
        elif e in ("bytes", "records"):
            out.append(f"{ind}{sizer}.bytes += bytes_size(static_cast<int64_t>({x}.size()), {c});")
            if f.zero_copy:
                out.append(f"{ind}{sizer}.zero_copy += {x}.size();")
        else:
            out.append(f"{ind}{x}.measure({sizer}, v);")

    # -- write --
    def write_value(self, f, x, c, out, ind):
        e = f.elem
        if f.is_array:
            if f.optional():
                out.append(f"{ind}if (!{x}) {{")
                out.append(f"{ind}  w.array_length(-1, {c});")
                out.append(f"{ind}}} else {{")
                ind2 = ind + "  "
                ref = "(*" + x + ")"
            else:
                ind2 = ind
                ref = x
            out.append(f"{ind2}w.array_length(static_cast<int32_t>({ref}.size()), {c});")
            out.append(f"{ind2}for (const auto& e : {ref}) {{")
            self.write_elem(f, "e", c, out, ind2 + "  ")
            out.append(f"{ind2}}}")
            if f.optional():
                out.append(f"{ind}}}")
            return
        if f.optional():
            if f.is_struct:
                out.append(f"{ind}if (!{x}) {{")
                out.append(f"{ind}  w.i8(-1);")
                out.append(f"{ind}}} else {{")
                out.append(f"{ind}  w.i8(1);")
                out.append(f"{ind}  {x}->write(w, v);")
                out.append(f"{ind}}}")
                return
            fn = {"string": "string_length", "bytes": "bytes_length", "records": "bytes_length"}[e]
            out.append(f"{ind}if (!{x}) {{")
            out.append(f"{ind}  w.{fn}(-1, {c});")
            out.append(f"{ind}}} else {{")
            self.write_elem(f, "(*" + x + ")", c, out, ind + "  ")
            out.append(f"{ind}}}")
            return
        self.write_elem(f, x, c, out, ind)

    def write_elem(self, f, x, c, out, ind):
        e = f.elem
        if e in FIXED:
            out.append(f"{ind}w.{FIXED[e][2]}({x});")
        elif e == "string":
            out.append(f"{ind}w.string({x}, {c});")
        elif e in ("bytes", "records"):
            if f.zero_copy:
                out.append(f"{ind}w.zero_copy_bytes({x}, {c});")
            else:
                out.append(f"{ind}w.bytes({x}, {c});")
        else:
            out.append(f"{ind}{x}.write(w, v);")

    # -- read --
    def read_value(self, f, x, c, nullable_c, out, ind):
        """Reads into `x`; nullable_c: C++ condition for null being allowed."""
        e = f.elem
        qname = json.dumps(f.name)
        if f.is_array:
            out.append(f"{ind}{{")
            out.append(f"{ind}  const int32_t n = r.array_length({c});")
            if f.optional():
                out.append(f"{ind}  if (n < 0) {{")
                out.append(f"{ind}    if (r.ok() && !({nullable_c})) r.fail_field(\"null array\", {qname});")
                out.append(f"{ind}    {x}.reset();")
                out.append(f"{ind}  }} else {{")
                out.append(f"{ind}    auto& a = {x}.emplace();")
            else:
                out.append(f"{ind}  if (n < 0) {{")
                out.append(f"{ind}    if (r.ok()) r.fail_field(\"null array\", {qname});")
                out.append(f"{ind}  }} else {{")
                out.append(f"{ind}    auto& a = {x};")
            ind3 = ind + "    "
            if e in FIXED:
                size = FIXED[e][1]
                out.append(f"{ind3}if (static_cast<size_t>(n) * {size} > r.remaining()) {{")
                out.append(f"{ind3}  r.fail_field(\"array longer than the frame\", {qname});")
                out.append(f"{ind3}}} else {{")
                out.append(f"{ind3}  a.resize(static_cast<size_t>(n));")
                out.append(f"{ind3}  for (auto& e : a) e = r.{FIXED[e][2]}();")
                out.append(f"{ind3}}}")
            else:
                out.append(f"{ind3}for (int32_t i = 0; i < n && r.ok(); ++i) {{")
                out.append(f"{ind3}  auto& e = a.emplace_back();")
                self.read_elem(f, "e", c, out, ind3 + "  ")
                out.append(f"{ind3}}}")
            out.append(f"{ind}  }}")
            out.append(f"{ind}}}")
            return
        if f.optional():
            if f.is_struct:
                out.append(f"{ind}if (r.i8() < 0) {{")
                out.append(f"{ind}  if (r.ok() && !({nullable_c})) r.fail_field(\"null struct\", {qname});")
                out.append(f"{ind}  {x}.reset();")
                out.append(f"{ind}}} else {{")
                # emplace(T{}), not emplace(): clang decides whether a nested
                # struct with member initialisers is default-constructible
                # while the enclosing message is still incomplete (no), and
                # std::optional<T> keeps that answer.
                out.append(f"{ind}  {x}.emplace({self.msg.name}::{f.struct_name}{{}}).read(r, v);")
                out.append(f"{ind}}}")
                return
            fn = {"string": "nullable_string", "bytes": "nullable_bytes", "records": "nullable_bytes"}[e]
            out.append(f"{ind}{x} = r.{fn}({c});")
            out.append(f"{ind}if (!{x} && r.ok() && !({nullable_c})) r.fail_field(\"null value\", {qname});")
            return
        self.read_elem(f, x, c, out, ind)

    def read_elem(self, f, x, c, out, ind):
        e = f.elem
        if e in FIXED:
            out.append(f"{ind}{x} = r.{FIXED[e][2]}();")
        elif e == "string":
            out.append(f"{ind}{x} = r.string({c});")
        elif e in ("bytes", "records"):
            out.append(f"{ind}{x} = r.bytes({c});")
        else:
            out.append(f"{ind}{x}.read(r, v);")

    # -- struct bodies --
    def tagged_fields(self, s):
        fs = [f for f in s.fields if f.tagged is not None]
        return sorted(fs, key=lambda f: f.tag)

    def gen_measure(self, s):
        out = [f"void {self.q(s)}::measure([[maybe_unused]] Sizer& s, [[maybe_unused]] int16_t v) const {{"]
        flex = self.msg.flex_expr()
        for f in s.fields:
            r = self.inline_range(f)
            if r is None:
                continue
            body = []
            c = self.compact(f)
            self.measure_value(f, f.member, c, body, "  ")
            out += guard(cond(r, self.valid), body, "  ")
        if self.msg.flexible_any:
            body = ["  size_t tags = unknown_tags.size();", "  s.bytes += raw_tags_size(unknown_tags);"]
            for f in self.tagged_fields(s):
                tr = self.tagged_range(f)
                if tr is None:
                    continue
                inner = [f"  if (!({f.member} == {f.default_value_expr()})) {{",
                         "    ++tags;", "    Sizer t;"]
                self.measure_value(f, f.member, "true", inner, "    ", "t")
                inner += [f"    s.bytes += uvarint_size({f.tag}) + uvarint_size(static_cast<uint32_t>(t.bytes)) + t.bytes;",
                          "    s.zero_copy += t.zero_copy;", "  }"]
                body += guard(cond(tr, self.valid), inner, "  ")
            body.append("  s.bytes += uvarint_size(static_cast<uint32_t>(tags));")
            out += guard(None if flex == "true" else flex, body, "  ") if flex != "false" else []
        out.append("}")
        # Fix indentation of guarded flexible block: guard adds 2 spaces.
        return out

    def gen_write(self, s):
        out = [f"void {self.q(s)}::write([[maybe_unused]] Writer& w, [[maybe_unused]] int16_t v) const {{"]
        flex = self.msg.flex_expr()
        for f in s.fields:
            r = self.inline_range(f)
            present = cond(r, self.valid) if r is not None else "false"
            if f.tagged is not None:
                present_any = cond(self.tagged_range(f), self.valid) if self.tagged_range(f) else "false"
            else:
                present_any = present
            body = []
            if r is not None and present != "false":
                c = self.compact(f)
                if f.nullable is not None and f.optional():
                    nc = self.nullable_cond(f)
                    if nc != "true":
                        check = f"!{f.member}" if nc == "false" else f"!{f.member} && !({nc})"
                        body.append(f"  if ({check}) w.fail(\"{s.name}.{f.name}: null at a version where it is not nullable\");")
                self.write_value(f, f.member, c, body, "  ")
                out += guard(present, body, "  ")
            # Absent versions: a non-default value cannot be carried.
            if not f.ignorable and present_any is not None:
                absent = "true" if present_any == "false" else f"!({present_any})"
                out.append(f"  if ({absent} && !({f.member} == {f.default_value_expr()})) {{")
                out.append(f"    w.fail(\"{s.name}.{f.name}: non-default value at a version without the field\");")
                out.append("  }")
        if self.msg.flexible_any:
            tagged = self.tagged_fields(s)
            body = ["  uint32_t tags = static_cast<uint32_t>(unknown_tags.size());"]
            for f in tagged:
                tr = self.tagged_range(f)
                if tr is None:
                    continue
                c = cond(tr, self.valid)
                test = f"!({f.member} == {f.default_value_expr()})"
                if c is not None:
                    test = f"({c}) && {test}"
                body.append(f"  if ({test}) ++tags;")
            body.append("  w.uvarint(tags);")
            body.append("  size_t next = 0;")
            for f in tagged:
                tr = self.tagged_range(f)
                if tr is None:
                    continue
                c = cond(tr, self.valid)
                test = f"!({f.member} == {f.default_value_expr()})"
                if c is not None:
                    test = f"({c}) && {test}"
                body.append(f"  write_raw_tags_below(w, unknown_tags, next, {f.tag});")
                body.append(f"  if ({test}) {{")
                body.append("    Sizer t;")
                self.measure_value(f, f.member, "true", body, "    ", "t")
                body.append(f"    w.uvarint({f.tag});")
                body.append("    w.uvarint(static_cast<uint32_t>(t.bytes));")
                self.write_value(f, f.member, "true", body, "    ")
                body.append("  }")
            body.append("  write_raw_tags_rest(w, unknown_tags, next);")
            if flex == "true":
                out += body
            else:
                out.append(f"  if ({flex}) {{")
                out += ["  " + l for l in body]
                out.append("  } else if (!unknown_tags.empty()) {")
                out.append(f"    w.fail(\"{s.name}: tagged fields at a version without them\");")
                out.append("  }")
        out.append("}")
        return out

    def gen_read(self, s):
        out = [f"void {self.q(s)}::read([[maybe_unused]] Reader& r, [[maybe_unused]] int16_t v) {{"]
        flex = self.msg.flex_expr()
        for f in s.fields:
            r_ = self.inline_range(f)
            if r_ is None:
                continue
            body = []
            self.read_value(f, f.member, self.compact(f), self.nullable_cond(f), body, "  ")
            out += guard(cond(r_, self.valid), body, "  ")
        if self.msg.flexible_any:
            body = ["  const uint32_t count = r.uvarint();",
                    "  for (uint32_t i = 0; i < count && r.ok(); ++i) {",
                    "    const uint32_t tag = r.uvarint();",
                    "    const uint32_t size = r.uvarint();",
                    "    if (!r.ok()) break;",
                    "    if (size > r.remaining()) {",
                    "      r.fail(\"tagged field longer than the frame\");",
                    "      break;",
                    "    }",
                    "    switch (tag) {"]
            for f in self.tagged_fields(s):
                tr = self.tagged_range(f)
                if tr is None:
                    continue
                c = cond(tr, self.valid)
                body.append(f"      case {f.tag}: {{")
                if c is not None:
                    body.append(f"        if (!({c})) goto unknown;")
                body.append("        const size_t end = r.end();")
                body.append("        r.set_end(r.position() + size);")
                self.read_value(f, f.member, "true", self.nullable_cond(f), body, "        ")
                body.append(f"        if (r.ok() && r.remaining() != 0) r.fail_field(\"tagged field size mismatch\", {json.dumps(f.name)});")
                body.append("        r.set_end(end);")
                body.append("        break;")
                body.append("      }")
            body += ["      default:",
                     "      unknown:",
                     "        unknown_tags.push_back(RawTag{tag, r.slice(size)});",
                     "        break;",
                     "    }",
                     "  }"]
            if not any(self.tagged_range(f) is not None and cond(self.tagged_range(f), self.valid) is not None
                       for f in self.tagged_fields(s)):
                body = [l for l in body if l.strip() != "unknown:"]
            if flex == "true":
                out += body
            else:
                out.append(f"  if ({flex}) {{")
                out += ["  " + l for l in body]
                out.append("  }")
        out.append("}")
        return out

    def gen_append(self, s):
        out = [f"void {self.q(s)}::append_to(std::string& out) const {{",
               f"  out += \"{s.name}{{\";"]
        for i, f in enumerate(s.fields):
            sep = ", " if i > 0 else ""
            out.append(f"  out += \"{sep}{f.member}=\";")
            out.append(f"  fmtdetail::append(out, {f.member});")
        if self.msg.flexible_any:
            out.append("  if (!unknown_tags.empty()) {")
            out.append("    out += \", unknown_tags=\";")
            out.append("    fmtdetail::append(out, unknown_tags);")
            out.append("  }")
        out.append("  out += '}';")
        out.append("}")
        return out

    def q(self, s):
        if s is self.msg.top:
            return self.msg.name
        return f"{self.msg.name}::{s.name}"

    # -- declarations --
    def decl_struct(self, s, ind, top=False):
        out = []
        for f in s.fields:
            init = f.default_expr()
            out.append(f"{ind}{f.cpp_type()} {f.member}{{{init}}};")
        if self.msg.flexible_any:
            out.append(f"{ind}RawTags unknown_tags;")
        out.append("")
        out.append(f"{ind}bool operator==(const {s.name}&) const = default;")
        out.append(f"{ind}void measure(Sizer& s, int16_t v) const;")
        out.append(f"{ind}void write(Writer& w, int16_t v) const;")
        out.append(f"{ind}void read(Reader& r, int16_t v);")
        out.append(f"{ind}void append_to(std::string& out) const;")
        return out

    def header(self):
        m = self.msg
        out = [f"// Generated from net/schemas/{m.group}/{m.name}.json by net/kafka/generate.py.",
               "#pragma once", "",
               "#include <cstdint>", "#include <optional>", "#include <string>",
               "#include <string_view>", "#include <vector>", "",
               '#include "net/kafka/wire.h"', "",
               "namespace brook::net {", "",
               f"struct {m.name} {{",
               f"  static constexpr std::string_view kName = \"{m.name}\";"]
        if m.api_key is not None:
            out.append(f"  static constexpr int16_t kApiKey = {m.api_key};")
        out.append(f"  static constexpr int16_t kLowestVersion = {m.valid[0]};")
        out.append(f"  static constexpr int16_t kHighestVersion = {m.valid[1]};")
        fr = intersect(m.flex, m.valid)
        out.append(f"  static constexpr int16_t kFirstFlexibleVersion = {fr[0] if fr else INF};")
        out.append("")
        for s in m.order:
            out.append(f"  struct {s.name} {{")
            out += self.decl_struct(s, "    ")
            out.append("  };")
            out.append("")
        out += self.decl_struct(m.top, "  ", top=True)
        out.append("};")
        out.append("")
        out.append("}  // namespace brook::net")
        return out

    def source(self):
        out = []
        for s in m_structs(self.msg):
            out += self.gen_measure(s) + [""]
            out += self.gen_write(s) + [""]
            out += self.gen_read(s) + [""]
            out += self.gen_append(s) + [""]
        return out

    # -- random instances (tests) --
    def gen_random(self, s):
        out = [f"void randomize([[maybe_unused]] {self.q(s)}& x, [[maybe_unused]] int16_t v, [[maybe_unused]] TestRandom& rnd, [[maybe_unused]] int depth) {{"]
        for f in s.fields:
            r = f.versions if f.tagged is None else self.tagged_range(f)
            if r is None:
                continue
            c = cond(r, self.valid)
            if c == "false":
                continue
            body = []
            x = "x." + f.member
            nc = self.nullable_cond(f)
            if f.tagged is not None:
                body.append("  if (rnd.chance(2)) {")
                ind = "    "
            else:
                ind = "  "
            if f.optional():
                test = "rnd.chance(4)" if nc == "true" else f"({nc}) && rnd.chance(4)"
                body.append(f"{ind}if ({test}) {{")
                body.append(f"{ind}  {x}.reset();")
                body.append(f"{ind}}} else {{")
                made = f"{self.msg.name}::{f.struct_name}{{}}" if f.is_struct and not f.is_array else ""
                body.append(f"{ind}  auto& y = {x}.emplace({made});")  # see read_value
                self.random_value(f, "y", body, ind + "  ")
                body.append(f"{ind}}}")
            else:
                self.random_value(f, x, body, ind)
            if f.tagged is not None:
                body.append("  }")
            out += guard(c, body, "  ")
        if self.msg.flexible_any:
            flex = self.msg.flex_expr()
            maxtag = max([f.tag for f in s.fields if f.tag is not None], default=-1)
            test = "rnd.chance(4)" if flex == "true" else f"{flex} && rnd.chance(4)"
            out.append(f"  if ({test}) {{")
            out.append(f"    x.unknown_tags.push_back(RawTag{{{maxtag + 1 + 7}u + static_cast<uint32_t>(rnd.below(3)), rnd.bytes(8)}});")
            out.append("  }")
        out.append("}")
        return out

    def random_value(self, f, x, out, ind):
        if f.is_array:
            out.append(f"{ind}{{")
            out.append(f"{ind}  const size_t n = depth > 3 ? 0 : rnd.below(4);")
            out.append(f"{ind}  {x}.resize(n);")
            out.append(f"{ind}  for (auto& e : {x}) {{")
            self.random_elem(f, "e", out, ind + "    ")
            out.append(f"{ind}  }}")
            out.append(f"{ind}}}")
        else:
            self.random_elem(f, x, out, ind)

    def random_elem(self, f, x, out, ind):
        e = f.elem
        if e in FIXED:
            out.append(f"{ind}rnd.fill({x});")
        elif e == "string":
            out.append(f"{ind}{x} = rnd.text(12);")
        elif e in ("bytes", "records"):
            out.append(f"{ind}{x} = rnd.bytes(40);")
        else:
            out.append(f"{ind}randomize({x}, v, rnd, depth + 1);")


def m_structs(m):
    return list(m.order) + [m.top]


def load(paths):
    msgs = []
    for p in paths:
        with open(p) as f:
            spec = json.load(f)
        group = os.path.basename(os.path.dirname(p))
        msgs.append(Message(spec, group))
    msgs.sort(key=lambda m: m.name)
    names = [m.name for m in msgs]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate message names")
    return msgs


def write_if_changed(path, lines):
    text = "\n".join(lines) + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    with open(path, "w") as f:
        f.write(text)


LISTENER_BITS = {"broker": 1, "controller": 2, "zkBroker": 4}


def gen_apis(msgs):
    requests = {m.api_key: m for m in msgs if m.kind == "request"}
    responses = {m.api_key: m for m in msgs if m.kind == "response"}
    keys = sorted(requests)
    h = ["// Generated by net/kafka/generate.py: the Kafka API keys and their messages.",
         "#pragma once", "", "#include <cstdint>", "#include <span>", "#include <string_view>", "",
         '#include "net/kafka/messages.h"', "", "namespace brook::net {", "",
         "enum class ApiKey : int16_t {"]
    for k in keys:
        name = requests[k].name[: -len("Request")]
        h.append(f"  k{name} = {k},")
    h += ["};", "",
          "// Listener kinds an API is served on (bit set).",
          "inline constexpr uint8_t kListenerBroker = 1;",
          "inline constexpr uint8_t kListenerController = 2;",
          "inline constexpr uint8_t kListenerZkBroker = 4;", "",
          "struct ApiInfo {",
          "  int16_t key;",
          "  std::string_view name;",
          "  int16_t min_version;",
          "  int16_t max_version;",
          "  // First version using compact encodings and tagged fields (0x7fff: none).",
          "  int16_t first_flexible;",
          "  // Versions Kafka marks deprecated: [min_version, deprecated_max] (-1: none).",
          "  int16_t deprecated_max;",
          "  uint8_t listeners;",
          "  // The highest version is still under development in Kafka.",
          "  bool unstable_latest;",
          "};", "",
          "// Every API key with a schema, in key order.",
          "std::span<const ApiInfo> all_apis();",
          "// nullptr for a key without a schema.",
          "const ApiInfo* find_api(int16_t key);",
          "// The request header version of (key, version): 2 for flexible versions,",
          "// 1 otherwise, 0 for ControlledShutdown v0. REQUIRES: known key.",
          "int16_t request_header_version(int16_t key, int16_t version);",
          "// The response header version: 1 for flexible versions, 0 otherwise, and",
          "// always 0 for ApiVersions.",
          "int16_t response_header_version(int16_t key, int16_t version);", "",
          "template <typename T>",
          "struct TypeTag {",
          "  using type = T;",
          "};", "",
          "// Calls f(TypeTag<Request>{}, TypeTag<Response>{}) for the key's message",
          "// types and returns its result, or returns fallback() for unknown keys.",
          "template <typename F, typename G>",
          "auto visit_api(int16_t key, F&& f, G&& fallback) {",
          "  switch (key) {"]
    for k in keys:
        h.append(f"    case {k}: return f(TypeTag<{requests[k].name}>{{}}, TypeTag<{responses[k].name}>{{}});")
    h += ["    default: return fallback();", "  }", "}", "",
          "}  // namespace brook::net"]
    c = ["// Generated by net/kafka/generate.py.", '#include "net/kafka/apis.h"', "",
         "#include <array>", "", "namespace brook::net {", "namespace {", "",
         f"constexpr std::array<ApiInfo, {len(keys)}> kApis = {{{{"]
    for k in keys:
        m = requests[k]
        fr = intersect(m.flex, m.valid)
        bits = sum(LISTENER_BITS.get(x, 0) for x in m.listeners)
        dep = m.deprecated[1] if m.deprecated else -1
        c.append(f"    {{{k}, \"{m.name[:-len('Request')]}\", {m.valid[0]}, {m.valid[1]}, "
                 f"{fr[0] if fr else INF}, {dep}, {bits}, {'true' if m.unstable else 'false'}}},")
    c += ["}};", "", "}  // namespace", "",
          "std::span<const ApiInfo> all_apis() { return kApis; }", "",
          "const ApiInfo* find_api(int16_t key) {",
          "  // Keys are dense from 0; the table is in key order.",
          "  for (const ApiInfo& info : kApis) {",
          "    if (info.key == key) return &info;",
          "  }",
          "  return nullptr;",
          "}", "",
          "int16_t request_header_version(int16_t key, int16_t version) {",
          "  const ApiInfo* info = find_api(key);",
          "  if (info != nullptr && version >= info->first_flexible) return 2;",
          f"  if (key == {[k for k in keys if requests[k].name == 'ControlledShutdownRequest'][0]} && version == 0) return 0;",
          "  return 1;",
          "}", "",
          "int16_t response_header_version(int16_t key, int16_t version) {",
          f"  if (key == {[k for k in keys if requests[k].name == 'ApiVersionsRequest'][0]}) return 0;",
          "  const ApiInfo* info = find_api(key);",
          "  return info != nullptr && version >= info->first_flexible ? 1 : 0;",
          "}", "",
          "}  // namespace brook::net"]
    return h, c


def gen_testing(msgs, shards):
    h = ["// Generated by net/kafka/generate.py: round-trip checks of every message.",
         "#pragma once", "", "#include <cstdint>", "#include <span>", "#include <string>",
         "#include <string_view>", "", '#include "absl/status/status.h"', '#include "io/buffer.h"', "",
         "namespace brook::net {", "",
         "// One message type: its name, versions, and a check that runs a random",
         "// instance (from seed) through encode, size and decode at a version.",
         "struct MessageCase {",
         "  std::string_view name;",
         "  std::string_view kind;",
         "  int16_t api_key;",
         "  int16_t min_version;",
         "  int16_t max_version;",
         "  // Empty on success, else what went wrong.",
         "  std::string (*round_trip)(uint64_t seed, int16_t version);",
         "  // Random instance encoded at a version (for malformed-input tests).",
         "  io::BufferChain (*sample)(uint64_t seed, int16_t version);",
         "  // Decode status of arbitrary bytes at a version.",
         "  absl::Status (*decode)(const io::Buffer& bytes, int16_t version);",
         "};",
         "std::span<const MessageCase> all_message_cases();", "",
         "}  // namespace brook::net"]
    per = [msgs[i::shards] for i in range(shards)]
    srcs = []
    for i in range(shards):
        lines = ["// Generated by net/kafka/generate.py.", '#include "net/kafka/testing.h"', ""]
        lines += [f'#include "net/kafka/messages/{m.file}.h"' for m in per[i]]
        lines += ['#include "net/kafka/round_trip.h"', "", "namespace brook::net {", ""]
        for m in per[i]:
            for st in m_structs(m):
                qn = m.name if st is m.top else f"{m.name}::{st.name}"
                lines.append(f"void randomize({qn}& x, int16_t v, TestRandom& rnd, int depth);")
        lines.append("")
        for m in per[i]:
            e = Emitter(m)
            for st in m_structs(m):
                lines += e.gen_random(st) + [""]
        lines.append(f"extern const MessageCase kMessageCases{i}[];")
        lines.append(f"const MessageCase kMessageCases{i}[] = {{")
        for m in per[i]:
            lines.append(f"    {{\"{m.name}\", \"{m.kind}\", {m.api_key if m.api_key is not None else -1}, "
                         f"{m.valid[0]}, {m.valid[1]}, &round_trip<{m.name}>, &sample<{m.name}>, "
                         f"&decode_status<{m.name}>}},")
        lines += ["};", "", "}  // namespace brook::net"]
        srcs.append(lines)
    idx = ["// Generated by net/kafka/generate.py.", '#include "net/kafka/testing.h"', "",
           "#include <vector>", "", "namespace brook::net {", ""]
    for i in range(shards):
        idx.append(f"extern const MessageCase kMessageCases{i}[];")
    idx += ["", "std::span<const MessageCase> all_message_cases() {",
            "  static const std::vector<MessageCase> cases = [] {",
            "    std::vector<MessageCase> all;"]
    for i in range(shards):
        idx.append(f"    all.insert(all.end(), kMessageCases{i}, kMessageCases{i} + {len(per[i])});")
    idx += ["    return all;", "  }();", "  return cases;", "}", "", "}  // namespace brook::net"]
    return h, srcs, idx


def main(argv):
    out = argv[1]
    shards = int(argv[2])
    test_shards = int(argv[3])
    msgs = load(argv[4:])
    base = os.path.join(out, "net", "kafka")
    umbrella = ["// Generated by net/kafka/generate.py: every Kafka message type.", "#pragma once", ""]
    for m in msgs:
        write_if_changed(os.path.join(base, "messages", m.file + ".h"), Emitter(m).header())
        umbrella.append(f'#include "net/kafka/messages/{m.file}.h"')
    per = [msgs[i::shards] for i in range(shards)]
    write_if_changed(os.path.join(base, "messages.h"), umbrella)
    for i in range(shards):
        lines = ["// Generated by net/kafka/generate.py.", ""]
        lines += [f'#include "net/kafka/messages/{m.file}.h"' for m in per[i]]
        lines += ["", "namespace brook::net {", ""]
        for m in per[i]:
            lines += Emitter(m).source()
        lines += ["}  // namespace brook::net"]
        write_if_changed(os.path.join(base, f"messages_{i}.cc"), lines)
    h, c = gen_apis(msgs)
    write_if_changed(os.path.join(base, "apis.h"), h)
    write_if_changed(os.path.join(base, "apis.cc"), c)
    th, tsrcs, tidx = gen_testing(msgs, test_shards)
    write_if_changed(os.path.join(base, "testing.h"), th)
    for i, src in enumerate(tsrcs):
        write_if_changed(os.path.join(base, f"testing_{i}.cc"), src)
    write_if_changed(os.path.join(base, "testing_cases.cc"), tidx)
    # Stamp so the build knows the run finished.
    write_if_changed(os.path.join(base, "generated.stamp"), [str(len(msgs))])


if __name__ == "__main__":
    main(sys.argv)
