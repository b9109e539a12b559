"""The C++ runtime a package's shared object needs or carries, against the
one this process loaded: a package that cannot run beside it is named
before it is loaded, not found by its crash.

Why (measured on the GPU machine, issue 70): that image sets
`CXX=/opt/gcc/bin/g++`, a GCC 13.3 that links libstdc++ statically. Every
AOTInductor package it built needed no libstdc++.so.6 and defined
libstdc++'s own symbols (`std::ios_base::Init`, `std::locale`'s facets),
and loading one into a process that already ran the shared libstdc++
(torch's) was a SIGSEGV inside `AOTIModelPackageLoader`, with this library
or without. Two copies of the C++ runtime's state in one process: here, with
Debian's g++ and `-static-libstdc++`, the same package fails in its
constructor instead. The other way a runtime can be missing, a package that
needs symbol versions newer than the loaded libstdc++ has, fails in dlopen
with a line that names no compiler.

Reading an ELF needs its section headers only: the dynamic section's needed
libraries, the version needs and the dynamic symbols. Read from the package
without extracting (AOTInductor stores its members uncompressed, so a seek
is cheap); no compiler, readelf or import of torch is needed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import struct
import subprocess
import zipfile
from pathlib import Path
from typing import BinaryIO

# A libstdc++'s symbol versions: the newest it provides says what it serves.
_GLIBCXX = re.compile(rb"GLIBCXX_3\.4(?:\.(\d+))?")
_GLIBCXX_NAME = re.compile(r"GLIBCXX_3\.4(?:\.(\d+))?$")
# Symbols only libstdc++ itself defines (the standard streams' set-up, the
# "C" locale): a shared object that defines one carries the runtime.
_RUNTIME_OWN = frozenset(
    {
        b"_ZNSt8ios_base4InitC1Ev",
        b"_ZSt21ios_base_library_initv",
        b"_ZNSt6locale5facet11_S_c_localeE",
    }
)
_SHARED_RUNTIME = "libstdc++.so.6"
# ELF: section types, and the dynamic section's tag of a needed library.
_SHT_DYNAMIC, _SHT_DYNSYM, _SHT_VERNEED = 6, 11, 0x6FFFFFFE
_DT_NEEDED = 1
_GCC_COMMENT = re.compile(rb"GCC: \(([^)]*)\) ([\w.]+)")


class PackageRuntimeMismatch(RuntimeError):
    """A package whose C++ runtime this process cannot give: loading it
    would crash or fail."""


@dataclasses.dataclass
class SharedObject:
    """What an ELF shared object says of its C++ runtime."""

    needed: list[str]
    newest_glibcxx: int | None  # N of the newest GLIBCXX_3.4.N it needs
    carries_runtime: bool  # defines libstdc++'s own symbols: linked in statically
    built_by: str  # the compiler its .comment names, "" where none


def _section_headers(f: BinaryIO) -> tuple[list[tuple[int, int, int, int, int]], int] | None:
    """(name, type, offset, size, link) of each section of a 64-bit
    little-endian ELF, and the index of the section of their names; None
    for anything else."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", head, 0x28)[0]
    entsize, count, names = struct.unpack_from("<HHH", head, 0x3A)
    f.seek(shoff)
    table = f.read(entsize * count)
    sections = [
        struct.unpack_from("<II", table, i * entsize)
        + struct.unpack_from("<QQI", table, i * entsize + 0x18)
        for i in range(count)
    ]
    return sections, names


def _read(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


def _string(table: bytes, at: int) -> bytes:
    return table[at : table.index(b"\0", at)]


def read_shared_object(f: BinaryIO) -> SharedObject | None:
    """The runtime facts of the ELF shared object `f` (seekable), or None
    where it is no 64-bit little-endian ELF."""
    headers = _section_headers(f)
    if headers is None:
        return None
    sections, names_index = headers
    names = b""
    if names_index < len(sections):
        names = _read(f, sections[names_index][2], sections[names_index][3])
    strings: dict[int, bytes] = {}

    def strings_of(index: int) -> bytes:
        if index not in strings:
            strings[index] = _read(f, sections[index][2], sections[index][3])
        return strings[index]

    needed: list[str] = []
    versions: list[int] = []
    carries, built_by = False, ""
    for name, kind, offset, size, link in sections:
        if kind == _SHT_DYNAMIC:
            data, table = _read(f, offset, size), strings_of(link)
            for tag, value in struct.iter_unpack("<qQ", data[: size - size % 16]):
                if tag == _DT_NEEDED:
                    needed.append(_string(table, value).decode(errors="replace"))
        elif kind == _SHT_DYNSYM:
            data, table = _read(f, offset, size), strings_of(link)
            for sym_name, _info, _other, shndx, _value, _size in struct.iter_unpack(
                "<IBBHQQ", data[: size - size % 24]
            ):
                if shndx != 0 and _string(table, sym_name) in _RUNTIME_OWN:
                    carries = True
        elif kind == _SHT_VERNEED:
            data, table = _read(f, offset, size), strings_of(link)
            at = 0
            while at + 16 <= len(data):
                _version, count, file_name, aux, following = struct.unpack_from("<HHIII", data, at)
                library = _string(table, file_name).decode(errors="replace")
                entry = at + aux
                for _ in range(count):
                    _hash, _flags, _other, version_name, next_aux = struct.unpack_from(
                        "<IHHII", data, entry
                    )
                    found = _GLIBCXX_NAME.match(
                        _string(table, version_name).decode(errors="replace")
                    )
                    if library == _SHARED_RUNTIME and found:
                        versions.append(int(found.group(1) or 0))
                    entry += next_aux
                if not following:
                    break
                at += following
        elif _string(names, name) == b".comment":
            comment = _GCC_COMMENT.search(_read(f, offset, size))
            if comment:
                release, build = (g.decode(errors="replace") for g in comment.group(2, 1))
                built_by = f"GCC {release} ({build})"
    return SharedObject(needed, max(versions) if versions else None, carries, built_by)


def newest_glibcxx(library: Path) -> int | None:
    """N of the newest GLIBCXX_3.4.N a libstdc++ provides (0 for
    GLIBCXX_3.4), read from its bytes; None where it cannot be read."""
    try:
        data = library.read_bytes()
    except OSError:
        return None
    found = [int(m.group(1) or 0) for m in _GLIBCXX.finditer(data)]
    return max(found) if found else None


def loaded_libstdcxx() -> Path | None:
    """The libstdc++ this process loaded (torch loads one)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ""
        if "/libstdc++.so" in path and not path.endswith("(deleted)"):
            return Path(path)
    return None


def _ask(compiler: str, *args: str) -> subprocess.CompletedProcess | None:
    """What `compiler` says to `args` (questions that build nothing); None
    where it cannot be run."""
    try:
        return subprocess.run([compiler, *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def compiler_libstdcxx(compiler: str, name: str = "libstdc++.so.6") -> Path | None:
    """The libstdc++ (`name`: the shared library, or the archive) that
    `compiler` links the packages it builds against."""
    said = _ask(compiler, f"-print-file-name={name}")
    if said is None:
        return None
    path = Path(said.stdout.strip())
    return path.resolve() if path.is_absolute() and path.exists() else None


def links_runtime_statically(compiler: str) -> bool:
    """Whether `compiler` links libstdc++ into the shared objects it makes,
    asked with -###, which prints the link it would run and runs nothing.

    Two ways were seen: -static-libstdc++ (libstdc++ between -Bstatic and
    -Bdynamic), and the GPU machine's /opt/gcc, whose plain -lstdc++ finds
    its own directory first, where libstdc++.so is a dangling link and
    libstdc++.a is not: the linker then takes the archive."""
    said = _ask(compiler, "-###", "-shared", "-fPIC", os.devnull, "-o", os.devnull)
    if said is None:
        return False
    for line in said.stderr.splitlines():
        words = [w.strip('"') for w in line.split()]
        if "-lstdc++" not in words and not any(w.endswith("libstdc++.a") for w in words):
            continue
        static = False
        searched: list[str] = []
        for w in words:
            if w in ("-Bstatic", "-static"):
                static = True
            elif w == "-Bdynamic":
                static = False
            elif w.startswith("-L") and len(w) > 2:
                searched.append(w[2:])
            elif w.endswith("libstdc++.a") or (w == "-lstdc++" and static):
                return True
            elif w == "-lstdc++":
                return _linker_finds_archive(searched)
    return False


def _linker_finds_archive(searched: list[str]) -> bool:
    """Whether ld, resolving a dynamic -lstdc++, takes libstdc++.a: in each
    -L directory in turn it opens libstdc++.so if it can, else the archive.
    Past them, its own directories hold the system's shared library."""
    for directory in searched:
        if os.path.exists(os.path.join(directory, "libstdc++.so")):
            return False
        if os.path.exists(os.path.join(directory, "libstdc++.a")):
            return True
    return False


def compiler_to_use(instead_of: str = "") -> str:
    """The fix's compiler: the system's g++, whose runtime is the one a
    process of this machine loads."""
    system = "/usr/bin/g++"
    if os.path.exists(system) and os.path.realpath(system) != os.path.realpath(instead_of or "/"):
        return f"CXX={system}"
    return "CXX set to a compiler that links libstdc++ as a shared library"


def _problem(where: str, so: SharedObject, loaded: Path, have: int | None) -> str | None:
    built = so.built_by or "an unnamed compiler"
    runtime = f"{loaded}" + (f" (up to GLIBCXX_3.4.{have})" if have is not None else "")
    fix = compiler_to_use(os.environ.get("CXX", ""))
    if so.carries_runtime and _SHARED_RUNTIME not in so.needed:
        return (
            f"{where} carries its own C++ runtime (libstdc++ linked in statically by {built}), "
            f"and this process runs {runtime}: two C++ runtimes in one process crash or fail "
            f"at load. Fix: compile it again with {fix}"
        )
    if so.newest_glibcxx is not None and have is not None and so.newest_glibcxx > have:
        return (
            f"{where} needs GLIBCXX_3.4.{so.newest_glibcxx} (built by {built}), and this "
            f"process runs {runtime}: its load fails. Fix: compile it again with {fix}"
        )
    return None


def package_problem(package: str | os.PathLike) -> str | None:
    """The one line that says why the AOTInductor package at `package`
    cannot run in this process, or None where nothing stands in the way
    (or nothing could be read: the loader then says what it finds)."""
    loaded = loaded_libstdcxx()
    if loaded is None:
        return None
    have = newest_glibcxx(loaded)
    try:
        with zipfile.ZipFile(package) as archive:
            for member in archive.infolist():
                if not member.filename.endswith(".so"):
                    continue
                with archive.open(member) as f:
                    so = read_shared_object(f)
                if so is None:
                    continue
                where = f"the package {os.fspath(package)} ({Path(member.filename).name})"
                if problem := _problem(where, so, loaded, have):
                    return problem
    except (OSError, zipfile.BadZipFile, struct.error, ValueError):
        return None
    return None
