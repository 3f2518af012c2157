"""docs_check.py - the documentation keeps up with the code, checked where a machine can check it:

- CLI: every subcommand of `wideattn --help` and `wideattn accuracy --help` has its section
  (README "The `wideattn` CLI", docs/accuracy.md section 3) and every option of its --help a row
  in an option table there; every option a section names exists.
- Environment: every variable read by dispatch/, accuracy/, tools/ and python/ (getenv,
  os.environ, library.switch_from_env, shell expansions) has a row in README's "Environment
  variables" table, and every row names a variable that is read.
- C API: every function, struct field and constant of include/wideattn.h is in docs/design.md
  "The C API at a glance", every function has a comment in the header, and the version of the
  header, meson.build, the manifest, README and docs/design.md agree.
- JSON and HDF5: every manifest field is in docs/design.md section 4 (and every field there in
  the manifest); every field bench_report.cpp and tuning.cpp write is in docs/design.md; every
  field of real accuracy reports is in docs/accuracy.md section 5 (and every field there in
  drift_report.cpp); every object and attribute of the sample HDF5 files is in docs/accuracy.md.
- Build options, tests and kernels: meson_options.txt matches README's table (names, defaults,
  choices); README's Tests section names every meson test; README's kernel table has the
  kernels of bundle/meson.build with the manifest's dtypes, head dims and groups, and names the
  spills each entry allows.
- Python: every public function, class and method of python/wideattn has a docstring naming
  each argument; every `wideattn.NAME` in README and docs/ exists, with the keywords used.

usage: python3 docs_check.py SOURCE_ROOT PATH/wideattn BUILD_MANIFEST_JSON
"""
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

from check_lines import expect, failures


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def section(text, heading_pattern):
    """The text under the first heading matching heading_pattern (a regex on the whole line) up
    to the next heading of the same or a higher level; "" when there is none."""
    match = re.search(r"^(#+) " + heading_pattern + r".*$", text, re.M)
    if not match:
        return ""
    level = len(match.group(1))
    rest = text[match.end():]
    end = re.search(r"^#{1,%d} " % level, rest, re.M)
    return match.group(0) + "\n" + (rest[:end.start()] if end else rest)


def table_rows(text):
    """(first cell, whole row) of every Markdown table row in text."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not re.match(r"^\|\s*-", line):
            cells = re.split(r"(?<!\\)\|", line)
            if len(cells) > 2:
                rows.append((cells[1], line))
    return rows


def ticked(text):
    """The `code` spans of text."""
    return re.findall(r"`([^`]+)`", text)


OPTION = r"--[a-z][a-z0-9-]*"


def cli(args):
    proc = subprocess.run([CLI] + args, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, WIDEATTN_LIBCUDA="/nonexistent/libcuda.so.1"))
    return proc.returncode, proc.stdout + proc.stderr


# ---------------------------------------------------------------- CLI


def help_options(text):
    """The options a --help text declares: those of its usage lines (up to the first blank line)
    and those heading an option line ("  --name ARG, --other ARG   meaning")."""
    usage = text.split("\n\n", 1)[0]
    options = set(re.findall(OPTION, usage))
    for line in text.splitlines():
        if re.match(r"^\s+--[a-z]", line):
            options |= set(re.findall(OPTION, re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]))
            options.add(re.match(r"^\s+(" + OPTION + ")", line).group(1))
    return options - {"--help"}


def listed_commands(text, header):
    """Command names listed under `header` ("commands:") of a help text, two spaces in."""
    body = text.split(header, 1)[1] if header in text else ""
    return [m.group(1) for m in re.finditer(r"^  ([a-z][a-z0-9-]*)\s", body, re.M)]


def table_options(text):
    """Options with a row of their own in an option table of text (first cell)."""
    options = set()
    for first, _ in table_rows(text):
        for code in ticked(first):
            options |= set(re.findall(OPTION, code))
    return options


def check_command_docs(name, help_text, doc, shared, synopsis):
    """One subcommand: every --help option has a table row in doc (or the shared table), every
    option of doc's tables and synopsis exists."""
    declared = help_options(help_text)
    rows = table_options(doc)
    missing = sorted(o for o in declared if o not in rows and o not in shared)
    expect(f"{name}: every option of --help has a row in the docs", not missing, missing)
    named = (rows | set(re.findall(OPTION, synopsis))) - {"--help"}
    stale = sorted(o for o in named if o not in declared)
    expect(f"{name}: every documented option exists", not stale, stale)


def documented_subcommands(command, heading, doc, doc_name, heading_pattern, section_pattern):
    """(name, its section of doc) for each subcommand `wideattn COMMAND --help` lists under
    `heading`; checks that each has a section and that every section heading names one."""
    prefix = " ".join(["wideattn"] + command)
    _, top = cli(command + ["--help"])
    names = listed_commands(top, heading)
    expect(f"{prefix} --help lists the subcommands", len(names) >= 5, names)
    headed = re.findall(heading_pattern, doc, re.M)
    expect(f"every {doc_name} subcommand section names a subcommand", set(headed) <= set(names), headed)
    found = []
    for name in names:
        text = section(doc, section_pattern(name))
        expect(f"{' '.join(command + [name])}: has a {doc_name} section", bool(text))
        if text:
            found.append((name, text))
    return found


def check_cli():
    readme = read("README.md")
    cli_section = section(readme, r"The `wideattn` CLI")
    intro = cli_section.split("\n### ", 1)[0]
    shared_for = re.search(r"Options of ((?:`[a-z]+`(?:, | and )?)+):", intro)
    shared_commands = re.findall(r"`([a-z]+)`", shared_for.group(1)) if shared_for else []
    shared = table_options(intro)
    for command, doc in documented_subcommands([], "commands:", cli_section, "README CLI",
                                                r"^### `wideattn ([a-z-]+)", lambda n: r"`wideattn " + n + r"\b"):
        if command == "accuracy":
            continue
        _, help_text = cli([command, "--help"])
        if command in shared_commands:
            expect(f"{command}: has the shared options", shared <= help_options(help_text))
        check_command_docs(command, help_text, doc, shared if command in shared_commands else set(),
                           doc.splitlines()[0])
    check_accuracy_cli()


def check_accuracy_cli():
    accuracy_doc = section(read("docs/accuracy.md"), r"3\. The `wideattn accuracy` subcommands")
    for sub, doc in documented_subcommands(["accuracy"], "subcommands:", accuracy_doc, "docs/accuracy.md",
                                           r"^### `([a-z-]+)`", lambda n: r"`" + n + r"`"):
        _, help_text = cli(["accuracy", sub, "--help"])
        synopsis = "\n".join(re.findall(r"```\n(wideattn accuracy [\s\S]*?)```", doc))
        check_command_docs(f"accuracy {sub}", help_text, doc, set(), synopsis)


# ---------------------------------------------------------------- environment

SOURCE_DIRS = ("dispatch", "accuracy", "tools", "python")
SOURCE_EXTENSIONS = (".h", ".cpp", ".cuh", ".py", ".in", ".sh")
# Standard variables the scripts pass through or extend rather than read as settings.
SYSTEM_VARIABLES = {"PATH", "HOME", "PWD", "LD_LIBRARY_PATH", "PYTHONPATH", "BASH_SOURCE", "TMPDIR", "USER"}


def source_files():
    for top in SOURCE_DIRS:
        for directory, _, names in os.walk(os.path.join(ROOT, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_EXTENSIONS):
                    yield os.path.join(directory, name)


def shell_reads(text):
    """Upper-case variables a shell script expands but never assigns."""
    assigned = set(re.findall(r"^\s*(?:export\s+|local\s+)?([A-Z_][A-Z0-9_]*)=", text, re.M))
    expanded = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)(?![A-Za-z0-9_])", text))
    return expanded - assigned - SYSTEM_VARIABLES


def environment_reads():
    """{variable: [files reading it]} over the sources, constants resolved."""
    texts = {path: open(path, encoding="utf-8", errors="replace").read() for path in source_files()}
    constants = {}
    for text in texts.values():
        constants.update(re.findall(r"\b(k\w+|ENV_\w+)\s*=\s*\"([A-Z_][A-Z0-9_]*)\"", text))
    reads = {}
    for path, text in texts.items():
        names = set(re.findall(r"getenv\(\s*\"([A-Z_][A-Z0-9_]*)\"", text))
        names |= {constants.get(c, c) for c in re.findall(r"getenv\(\s*(?:\w+::)*(k\w+)\s*\)", text)}
        names |= set(re.findall(r"os\.(?:environ(?:\.get)?|getenv)[\[(]\s*\"([A-Z_][A-Z0-9_]*)\"", text))
        names |= {constants.get(c, c)
                  for c in re.findall(r"os\.(?:environ(?:\.get)?|getenv)[\[(]\s*([A-Z_]\w*)\b", text)}
        # python/wideattn's on/off variables go through library.switch_from_env(NAME, ...).
        names |= {constants.get(c, c) for c in re.findall(r"switch_from_env\(\s*(ENV_\w+)\s*,", text)}
        if path.endswith(".sh"):
            names |= shell_reads(text)
        for name in names:
            reads.setdefault(name, []).append(os.path.relpath(path, ROOT))
    return reads


def check_environment():
    reads = environment_reads()
    expect("environment: the library's variables are found", {"WIDEATTN_BUNDLE", "WIDEATTN_TUNING"} <= set(reads),
           sorted(reads))
    table = section(read("README.md"), r"Environment variables")
    documented = {code for first, _ in table_rows(table) for code in ticked(first)}
    missing = sorted(f"{name} ({', '.join(files)})" for name, files in reads.items() if name not in documented)
    expect("environment: every variable read has a row in README's table", not missing, missing)
    stale = sorted(name for name in documented if name not in reads and name != "variable")
    expect("environment: every row of README's table is read somewhere", not stale, stale)


# ---------------------------------------------------------------- C API


def header_names(header):
    """(functions, struct fields, constants) of the C header (comments removed)."""
    code = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    functions = re.findall(r"WIDEATTN_API[^;(]*?\b(wideattn_\w+)\s*\(", code)
    fields = []
    for body in re.findall(r"typedef struct \w+ \{(.*?)\} \w+;", code, re.S):
        for declaration in filter(None, (d.strip() for d in body.split(";"))):
            parts = declaration.split(",")
            fields += re.findall(r"(\w+)\s*$", parts[0]) + [p.strip() for p in parts[1:]]
    constants = set(re.findall(r"#define (WIDEATTN_\w+)", code)) - {"WIDEATTN_H"}
    for body in re.findall(r"typedef enum \w+ \{(.*?)\}", code, re.S):
        constants |= set(re.findall(r"\b(WIDEATTN_\w+)\s*=", body))
    return functions, fields, sorted(constants)


def uncommented_functions(header):
    """Functions whose declaration (or group of adjacent declarations) has no comment above it."""
    lines = header.splitlines()
    missing = []
    for i, line in enumerate(lines):
        match = re.match(r"WIDEATTN_API .*?\b(wideattn_\w+)\s*\(", line)
        if not match:
            continue
        j = i - 1
        while j >= 0 and (not lines[j].strip() or lines[j].startswith("WIDEATTN_API") or lines[j].startswith(" ")):
            if lines[j].rstrip().endswith("*/"):
                break
            j -= 1
        if j < 0 or not lines[j].rstrip().endswith("*/"):
            missing.append(match.group(1))
    return missing


def check_c_api():
    header = read("include/wideattn.h")
    summary = section(read("docs/design.md"), r"The C API at a glance")
    expect("design.md has 'The C API at a glance'", bool(summary))
    functions, fields, constants = header_names(header)
    for kind, names in (("function", functions), ("struct field", fields), ("constant", constants)):
        missing = sorted({n for n in names if not re.search(r"\b" + n + r"\b", summary)})
        expect(f"C API: every {kind} of wideattn.h is in design.md's summary ({len(set(names))})", not missing, missing)
    expect("C API: every function has a comment in wideattn.h", not uncommented_functions(header),
           uncommented_functions(header))
    version = ".".join(re.search(r"#define WIDEATTN_VERSION_%s (\d+)" % part, header).group(1)
                       for part in ("MAJOR", "MINOR", "PATCH"))
    meson_version = re.search(r"version:\s*'([^']+)'", read("meson.build")).group(1)
    expect("C API: meson.build's version is the header's", meson_version == version, (meson_version, version))
    expect("C API: the manifest's library_version is the header's", MANIFEST["library_version"] == version)
    for doc in ("README.md", "docs/design.md"):
        stated = re.findall(r"C API version (\d+\.\d+\.\d+)", read(doc))
        expect(f"C API: {doc} states the version {version}", stated and set(stated) == {version}, stated)


# ---------------------------------------------------------------- JSON and HDF5


def check_manifest_fields():
    doc = section(read("docs/design.md"), r"4\. The bundle and the manifest")
    rows = {}
    for first, row in table_rows(doc):
        for name in ticked(first):
            rows[name] = row
    entries = MANIFEST["kernels"]
    written = {key: MANIFEST[key] for key in MANIFEST if key != "kernels"}
    written["kernels"] = entries
    for entry in entries:
        written.update(entry)
    missing = sorted(key for key in written if key not in rows)
    expect("manifest: every field is in design.md section 4", not missing, missing)
    nested = sorted(f"{key}.{sub}" for key, value in written.items() if isinstance(value, dict) and key in rows
                    for sub in value if not re.search(r"\{[^}]*\b" + sub + r"\b[^}]*\}", rows[key]))
    expect("manifest: every nested field is in its row's {...}", not nested, nested)
    stale = sorted(name for name in rows if re.fullmatch(r"[a-z_0-9]+", name) and name not in written
                   and name != "field")
    expect("manifest: every field of design.md section 4 is in the manifest", not stale, stale)


def written_json_keys(path, function=None):
    """Keys a C++ source writes as \\"key\\": (in `function` only, when given)."""
    text = read(path)
    if function:
        start = text.index(function)
        end = text.find("\n}\n", start)
        text = text[start:end]
    return set(re.findall(r'\\"([a-z_0-9]+)\\":', text))


def bullet(text, title):
    """The '- **title**' bullet of text, up to the next bullet or heading."""
    start = text.index("- **" + title)
    end = re.search(r"^(- \*\*|#)", text[start + 4:], re.M)
    return text[start:start + 4 + end.start()] if end else text[start:]


def check_report_fields():
    design = read("docs/design.md")
    bench = bullet(design, "`wideattn bench --json` fields")
    keys = written_json_keys("tools/cli/bench_report.cpp")
    expect("bench --json: the keys are found", len(keys) > 20, sorted(keys))
    missing = sorted(k for k in keys if f"`{k}`" not in bench)
    expect("bench --json: every field written is in design.md", not missing, missing)
    stale = sorted(n for n in ticked(bench) if re.fullmatch(r"[a-z][a-z0-9_]*", n) and n not in keys)
    expect("bench --json: every field design.md names is written", not stale, stale)
    tuning = bullet(design, "Tuning file.")
    keys = written_json_keys("dispatch/tuning.cpp", "std::string tuning_json(")
    expect("tuning file: the keys are found", len(keys) > 10, sorted(keys))
    missing = sorted(k for k in keys if f"`{k}`" not in tuning)
    expect("tuning file: every field written is in design.md", not missing, missing)


def json_keys(value, keys):
    if isinstance(value, dict):
        for key, item in value.items():
            keys.add(key)
            json_keys(item, keys)
    elif isinstance(value, list):
        for item in value:
            json_keys(item, keys)
    return keys


def accuracy_report_keys(directory):
    data = os.path.join(ROOT, "data")
    ref, cand, base = (os.path.join(data, f"sample_{r}.h5") for r in ("reference", "candidate_pass", "baseline"))
    runs = [["kl", ref, cand, "--baseline", base], ["gate", ref, cand, "--baseline", base],
            ["gate", ref, cand, "--budget", "0.1"]]
    keys = set()
    for i, run in enumerate(runs):
        path = os.path.join(directory, f"report{i}.json")
        rc, output = cli(["accuracy"] + run + ["--json", path])
        expect(f"accuracy {run[0]} writes a report", rc in (0, 1, 3) and os.path.exists(path), output[-300:])
        if os.path.exists(path):
            with open(path) as f:
                json_keys(json.load(f), keys)
    return keys


def check_accuracy_report(directory):
    doc = section(read("docs/accuracy.md"), r"5\. JSON report")
    keys = accuracy_report_keys(directory)
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    expect("accuracy report: every field is in docs/accuracy.md section 5", not missing, missing)
    literals = set(re.findall(r'"([a-z_0-9]+)"', read("accuracy/drift_report.cpp")))
    named = {n for first, _ in table_rows(doc) for n in ticked(first)} | set(re.findall(r'"([a-z_0-9]+)":', doc))
    stale = sorted(n for n in named if re.fullmatch(r"[a-z_0-9]+", n) and n not in literals and n != "field")
    expect("accuracy report: every field of section 5 is written by drift_report.cpp", not stale, stale)


def hdf5_names(path):
    """Objects ('/name') and attribute names of an HDF5 file (h5py)."""
    import h5py
    names = set()
    with h5py.File(path, "r") as f:
        names |= set(f.attrs)
        for key, item in f.items():
            names.add("/" + key)
            names |= set(item.attrs)
    return names


def check_hdf5(directory):
    if importlib.util.find_spec("h5py") is None:  # Debian's python3-h5py, installed by tools/setup.sh
        print("skip HDF5 names: no h5py in this interpreter")
        return
    doc = read("docs/accuracy.md")
    schemas = section(doc, r"1\. Logit dump files") + section(doc, r"2\. Attention case files")
    bf16 = os.path.join(directory, "bf16")
    cli(["accuracy", "make-sample", bf16, "--tokens", "4", "--vocab", "8", "--dtype", "bfloat16", "--roles",
         "reference"])
    files = [os.path.join(ROOT, "data", n) for n in ("sample_reference.h5", "sample_attn.h5")]
    files.append(os.path.join(bf16, "sample_reference.h5"))
    names = set()
    for path in files:
        expect(f"HDF5 sample {os.path.basename(os.path.dirname(path))}/{os.path.basename(path)} exists",
               os.path.exists(path))
        if os.path.exists(path):
            names |= hdf5_names(path)
    missing = sorted(n for n in names if f"`{n}`" not in schemas and f"`{n} " not in schemas)
    expect(f"HDF5: every object and attribute of the samples is in docs/accuracy.md ({len(names)})", not missing,
           missing)


# ---------------------------------------------------------------- build options and kernels


def meson_default(text):
    text = text.strip()
    if text.startswith("["):
        items = re.findall(r"'([^']*)'", text)
        return ",".join(items) if items else "[]"
    return text.strip("'")


def check_test_list():
    tests = re.findall(r"^test\('([a-z_0-9]+)'", read("tests/meson.build"), re.M)
    listed = section(read("README.md"), r"Tests")
    missing = [t for t in tests if f"`{t}`" not in listed]
    expect(f"tests: README's Tests section names every meson test ({len(tests)})", not missing, missing)


def check_build_options():
    options = {}
    for name, body in re.findall(r"option\('(\w+)',(.*?)\)\s*$", read("meson_options.txt"), re.S | re.M):
        value = re.search(r"value:\s*(\[[^\]]*\]|'[^']*'|\w+)", body)
        choices = re.findall(r"'([^']*)'", re.search(r"choices:\s*(\[[^\]]*\])", body).group(1)) \
            if "choices:" in body else []
        options[name] = (meson_default(value.group(1)), choices)
    expect("build options: meson_options.txt is read", len(options) >= 4, sorted(options))
    readme = read("README.md")
    table = readme[readme.index("Build options ("):]
    table = table[:table.index("\n\n", table.index("| --- "))]
    rows = {ticked(first)[0]: row for first, row in table_rows(table) if ticked(first)}
    expect("build options: README's table has every option and no other",
           set(rows) == set(options), (sorted(rows), sorted(options)))
    for name, (default, choices) in options.items():
        cells = re.split(r"(?<!\\)\|", rows.get(name, "|||"))
        expect(f"build option {name}: README's default is {default}", f"`{default}`" in cells[2], cells[2:3])
        missing = [c for c in choices if c not in cells[-2]]
        expect(f"build option {name}: README names every choice", not missing, missing)


def bundle_entries():
    """{name: {'archs': [...], 'min_sm': N, 'spills': [...]}} from bundle/meson.build's table."""
    text = read("bundle/meson.build")
    table = text[text.index("bundle_kernels = ["):text.index("\n]\n")]
    # Candidate kernels (the candidate_kernels option) are rows of the same form in candidate_table.
    candidates = text[text.index("candidate_table = {"):]
    candidates = candidates[:candidates.index("\n}\n")]
    entries = {}
    for body in re.split(r"\n\s*(?:'\w+': )?\{(?='name')", table + candidates)[1:]:
        name = re.search(r"'name': '(\w+)'", body).group(1)
        archs = re.search(r"'archs': \[([^\]]*)\]", body)
        spills = re.search(r"'spills_allowed_sm': \[([^\]]*)\]", body)
        entries[name] = {"archs": re.findall(r"'(\w+)'", archs.group(1)) if archs else [],
                         "min_sm": int(re.search(r"'min_sm': (\d+)", body).group(1)),
                         "spills": re.findall(r"\d+", spills.group(1)) if spills else []}
    return entries


def expected_cells(kernel):
    """README's head dim and group cells for a manifest entry."""
    dims, group = kernel["head_dim"], kernel["group"]
    head_dim = str(dims["min"]) if dims["min"] == dims["max"] else f"{dims['min']}..{dims['max']} step {dims['step']}"
    if kernel["kind"] in ("quantize_e4m3", "amax_e4m3", "k_from_v_rebuild"):
        group_text = "-"
    elif group["min"] == group["max"]:
        group_text = str(group["min"])
    else:
        group_text = "any"
    return head_dim, group_text


# The lowest min_sm of bundle/meson.build (the mma tier's sm_80): README states a higher one.
BASE_MIN_SM = 80


def check_kernel_row(name, entry, row, kernel):
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    if kernel is not None:
        head_dim, group = expected_cells(kernel)
        expect(f"kernel {name}: head dim {head_dim}, group {group}", cells[2:4] == [head_dim, group], cells[2:4])
        if kernel["kind"] == "prefill":
            dtypes = "/".join(kernel[k] for k in ("q_dtype", "kv_dtype", "o_dtype"))
            expect(f"kernel {name}: dtypes {dtypes}", cells[1] == dtypes, cells[1])
    for arch in entry["archs"]:
        expect(f"kernel {name}: README says {arch} only", f"{arch} only" in row)
    if entry["min_sm"] > BASE_MIN_SM and not entry["archs"]:
        expect(f"kernel {name}: README says min sm_{entry['min_sm']}", f"min sm_{entry['min_sm']}" in row)
    for sm in entry["spills"]:
        stated = re.search(r"\d+ bytes of spill[^|]*?\bsm_%sa?\b" % sm, row)
        expect(f"kernel {name}: README states its allowed spills on sm_{sm}", bool(stated))


def check_kernel_table():
    table = section(read("README.md"), r"Kernels")
    rows = {}
    for first, row in table_rows(table):
        names = ticked(first)
        if names and names[0] != "kernel":
            rows[names[0]] = row
    entries = bundle_entries()
    expect("kernels: README's table has the kernels of bundle/meson.build", set(rows) == set(entries),
           (sorted(set(rows) ^ set(entries))))
    built = {k["name"]: k for k in MANIFEST["kernels"]}
    for name, entry in entries.items():
        if name in rows:
            check_kernel_row(name, entry, rows[name], built.get(name))


# ---------------------------------------------------------------- Python


PUBLIC_MODULES = ("__init__", "attention", "errors", "library", "ops", "quantization", "reference", "serving",
                  "transformers", "cpp_ops", "v_only_cache")


def parameters(function):
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]


def undocumented(node, where, class_doc=""):
    """'module.name: what is missing' for every public function, class and method under node."""
    problems = []
    for item in node.body:
        if not isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            continue
        if item.name.startswith("_") and item.name != "__init__":
            continue
        doc = ast.get_docstring(item) or ""
        label = f"{where}.{item.name}"
        if isinstance(item, ast.ClassDef):
            problems += [f"{label}: no docstring"] if not doc else []
            problems += undocumented(item, label, doc)
            continue
        if item.name == "__init__":
            doc += class_doc
        elif not doc:
            problems.append(f"{label}: no docstring")
            continue
        problems += [f"{label}: argument {a} not in the docstring" for a in parameters(item)
                     if not re.search(r"\b" + a + r"\b", doc)]
    return problems


def package_modules():
    base = os.path.join(ROOT, "python", "wideattn")
    return {name: ast.parse(read(os.path.join("python", "wideattn", name + ".py"))) for name in PUBLIC_MODULES
            if os.path.exists(os.path.join(base, name + ".py"))}


def defined_names(tree):
    """{name: node} of a module's top-level functions, classes and assignments."""
    names = {}
    for item in tree.body:
        if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
            names[item.name] = item
        elif isinstance(item, ast.Assign):
            for target in item.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = item
        elif isinstance(item, ast.ImportFrom):
            for alias in item.names:
                names[alias.asname or alias.name] = alias
    return names


def torch_names(init_tree):
    """{name: module} of __init__'s _TORCH_NAMES (the names resolved from submodules on first use)."""
    for item in init_tree.body:
        if isinstance(item, ast.Assign) and any(getattr(t, "id", "") == "_TORCH_NAMES" for t in item.targets):
            return ast.literal_eval(item.value)
    return {}


def package_namespace(modules):
    """{NAME: node} of what `wideattn.NAME` reaches: __init__'s own names, its imports and torch
    names (as the node that defines them), and the submodules (None)."""
    defined = {module: defined_names(tree) for module, tree in modules.items()}
    space = {module: None for module in modules if module != "__init__"}
    for item in modules["__init__"].body:
        if isinstance(item, ast.ImportFrom) and item.module in defined:
            for alias in item.names:
                space[alias.asname or alias.name] = defined[item.module].get(alias.name)
    for name, node in defined["__init__"].items():
        if not isinstance(node, ast.alias):
            space.setdefault(name, node)
    for name, module in torch_names(modules["__init__"]).items():
        space[name] = defined[module].get(name, False)
    return space, defined


def call_problems(name, arguments, node):
    """What a documented call or signature of a function gets wrong: keywords it lacks, more
    positional arguments than it takes, and in a signature (some `name=None|True|False|0`
    default) a positional name that is not its parameter at that place."""
    if not isinstance(node, ast.FunctionDef):
        return []
    known = parameters(node)
    problems = [f"wideattn.{name}: no argument {u}" for u in re.findall(r"\b([a-z_]\w*)\s*=(?!=)", arguments)
                if u not in known]
    items = [a.strip() for a in arguments.split(",") if a.strip() and a.strip() != "..."]
    positional = [a for a in items if not re.match(r"[a-z_]\w*\s*=", a)]
    takes = [a for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
    if "..." not in arguments and len(positional) > len(takes):
        problems.append(f"wideattn.{name}: {len(positional)} positional arguments, more than it takes")
    if re.search(r"=\s*(None|True|False|0)\b", arguments):
        problems += [f"wideattn.{name}: argument {i + 1} is {p}, not {known[i] if i < len(known) else '-'}"
                     for i, p in enumerate(positional) if i >= len(known) or p != known[i]]
    return problems


def check_python():
    modules = package_modules()
    problems = []
    for module, tree in modules.items():
        problems += undocumented(tree, module)
    expect(f"python: every public function names its arguments in its docstring ({len(modules)} modules)",
           not problems, problems)
    space = package_namespace(modules)
    docs = {"README.md": read("README.md")}
    for name in sorted(os.listdir(os.path.join(ROOT, "docs"))):
        docs["docs/" + name] = read("docs/" + name)
    problems = []
    for path, text in docs.items():
        for match in re.finditer(r"(?<![\w./])wideattn\.([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)(\([^()]*\))?", text):
            name = match.group(1)
            if re.fullmatch(r"(h|pc|so)(\..*)?", name):
                continue
            target = resolve(space, name)
            if target is False:
                problems.append(f"{path}: wideattn.{name} does not exist")
            elif match.group(2):
                problems += [f"{path}: {p}" for p in call_problems(name, match.group(2)[1:-1], target)]
    expect("python: every wideattn.NAME in README and docs/ exists, with its keywords", not problems, problems)


def resolve(namespace, name):
    """The node `wideattn.name` reaches, None for a module, False when nothing is there."""
    space, defined = namespace
    if name in space:
        return space[name]
    head, _, rest = name.partition(".")
    node = space.get(head, False)
    if node is None:
        return defined[head].get(rest, False)
    if isinstance(node, ast.ClassDef):
        methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
        return methods.get(rest, False)
    return False


def main():
    check_cli()
    check_environment()
    check_c_api()
    check_manifest_fields()
    check_report_fields()
    with tempfile.TemporaryDirectory() as directory:
        check_accuracy_report(directory)
        check_hdf5(directory)
    check_build_options()
    check_test_list()
    check_kernel_table()
    check_python()
    print(f"{len(failures)} failed" if failures else "all passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ROOT, CLI = sys.argv[1], sys.argv[2]
    with open(sys.argv[3]) as manifest_file:
        MANIFEST = json.load(manifest_file)
    main()
