#!/usr/bin/env python3
"""compare_cubins.py - says whether two bundles' cubins hold the same machine code, for refactors
that must not change what the GPU runs (so results measured before them stay valid).

The cubins are built with -lineinfo, whose line tables record each source file's path,
modification time and size: touching a header changes every cubin that includes it, so a plain
byte comparison cannot tell a refactor that changes code from one that does not. This compares
every ELF section except the debug ones (names containing "debug": line tables, their
relocations, the embedded PTX text): code, relocations, constants, kernel info, symbols.

  compare_cubins.py BEFORE_DIR AFTER_DIR

Exit status 0 when every cubin of either directory exists in both and matches, 1 when any
differs or is missing, 2 on bad arguments or a file that is not an ELF64 cubin.
"""
import os
import struct
import sys

ELF_MAGIC = b"\x7fELF"
ELF_CLASS_64 = 2
SECTION_HEADER_OFFSET = 0x28  # e_shoff
SECTION_COUNTS_OFFSET = 0x3A  # e_shentsize, e_shnum, e_shstrndx
SECTION_HEADER_FORMAT = "<IIQQQQIIQQ"  # name, type, flags, addr, offset, size, link, info, align, entsize
SECTION_TYPE_NOBITS = 8


class NotACubin(Exception):
    pass


def sections(path):
    """{name: (type, flags, size, bytes)} of an ELF64 file's sections."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != ELF_MAGIC or len(data) < 0x40 or data[4] != ELF_CLASS_64:
        raise NotACubin(f"{path}: not an ELF64 file")
    header_offset = struct.unpack_from("<Q", data, SECTION_HEADER_OFFSET)[0]
    entry_size, count, names_index = struct.unpack_from("<HHH", data, SECTION_COUNTS_OFFSET)
    if header_offset + count * entry_size > len(data) or names_index >= count:
        raise NotACubin(f"{path}: section headers out of range")
    headers = [struct.unpack_from(SECTION_HEADER_FORMAT, data, header_offset + i * entry_size) for i in range(count)]
    names_offset = headers[names_index][4]
    result = {}
    for name_at, kind, flags, _, offset, size, *_ in headers:
        start = names_offset + name_at
        name = data[start:data.index(b"\0", start)].decode()
        result[name] = (kind, flags, size, b"" if kind == SECTION_TYPE_NOBITS else data[offset:offset + size])
    return result


def code_sections(path):
    return {name: value for name, value in sections(path).items() if "debug" not in name}


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    before_dir, after_dir = argv[1], argv[2]
    for directory in (before_dir, after_dir):
        if not os.path.isdir(directory):
            print(f"compare_cubins: '{directory}' is not a directory", file=sys.stderr)
            return 2
    names = sorted({f for d in (before_dir, after_dir) for f in os.listdir(d) if f.endswith(".cubin")})
    if not names:
        print(f"compare_cubins: no .cubin files in '{before_dir}' or '{after_dir}'", file=sys.stderr)
        return 2
    differing = 0
    for name in names:
        paths = [os.path.join(before_dir, name), os.path.join(after_dir, name)]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            print(f"MISSING {name}: not in {', '.join(missing)}")
            differing += 1
            continue
        try:
            before, after = (code_sections(p) for p in paths)
        except NotACubin as error:
            print(f"compare_cubins: {error}", file=sys.stderr)
            return 2
        changed = sorted(s for s in before.keys() | after.keys() if before.get(s) != after.get(s))
        print(f"{'DIFF' if changed else 'SAME'} {name}" + (f": {', '.join(changed)}" if changed else ""))
        differing += bool(changed)
    print(f"{len(names) - differing} same, {differing} differ")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
