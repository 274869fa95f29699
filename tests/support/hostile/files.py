"""Hostile files, each made under a folder with the name the surface expects (config.json, an env
file, a key file, a database): `make(kind, folder, name, valid)` returns its path. `valid` is what a
good file of that place holds; kinds that bend it (BOM and CRLF, another schema) start from it.

Every kind here is one a careless or hostile user can hand over: none may hang a reader, exhaust
its memory, or end in a traceback. Only BOM_CRLF may rightly be accepted (and then read as the
same content); every other kind must be refused in one line naming the file."""
from __future__ import annotations

import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

GiB = 2**30

FIFO = "fifo"
DEV_ZERO = "dev-zero"
DEV_NULL = "dev-null"
FOLDER = "folder"
HUGE = "huge-sparse"
DEEP = "deep-json"
NOT_UTF8 = "not-utf8"
BOM_CRLF = "bom-crlf"
OTHER_SCHEMA = "other-schema"
EMPTY = "empty"
LOOP = "symlink-loop"
MISSING = "missing"
ZIP_COUNT_BOMB = "zip-count-bomb"
ZIP_SIZE_BOMB = "zip-size-bomb"
ZIP_SLIP = "zip-slip"
TAR_SLIP = "tar-slip"

FILE_KINDS = (FIFO, DEV_ZERO, DEV_NULL, FOLDER, HUGE, DEEP, NOT_UTF8, BOM_CRLF, OTHER_SCHEMA, EMPTY, LOOP, MISSING)
ARCHIVE_KINDS = (ZIP_COUNT_BOMB, ZIP_SIZE_BOMB, ZIP_SLIP, TAR_SLIP)
MAY_BE_ACCEPTED = (BOM_CRLF,)  # the same content with a BOM and CRLF line ends: read alike, or refused

DEEP_LEVELS = 200_000
HUGE_BYTES = 8 * GiB
COUNT_BOMB_MEMBERS = 3_000
SIZE_BOMB_BYTES = 256 * 2**20     # one member, 60 times any record cap, about 250 KiB on disk
OTHER_SCHEMA_JSON = {"name": "left-pad", "versions": {"1.3.0": {"dist": {"tarball": "left-pad-1.3.0.tgz"}}},
                     "ecosystem": "npm"}  # valid JSON, an npm registry record: neither OSV nor a config


def make(kind: str, folder: Path, name: str, valid: bytes = b"{}\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if kind == FIFO:
        os.mkfifo(path)
    elif kind == DEV_ZERO:
        path.symlink_to("/dev/zero")
    elif kind == DEV_NULL:
        path.symlink_to("/dev/null")
    elif kind == FOLDER:
        path.mkdir()
        (path / "inside.json").write_bytes(valid)
    elif kind == HUGE:
        with open(path, "wb") as handle:  # sparse: no disk, no time
            handle.truncate(HUGE_BYTES)
    elif kind == DEEP:
        path.write_bytes(b"[" * DEEP_LEVELS + b"]" * DEEP_LEVELS)
    elif kind == NOT_UTF8:
        path.write_bytes(b"\xff\xfe" + valid[:64] + b"\xc3\x28\x80")
    elif kind == BOM_CRLF:
        path.write_bytes(b"\xef\xbb\xbf" + valid.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    elif kind == OTHER_SCHEMA:
        path.write_text(json.dumps(OTHER_SCHEMA_JSON))
    elif kind == EMPTY:
        path.write_bytes(b"")
    elif kind == LOOP:
        path.symlink_to(path.name)
    elif kind == MISSING:
        pass
    elif kind == ZIP_COUNT_BOMB:
        with zipfile.ZipFile(path, "w") as archive:
            for number in range(COUNT_BOMB_MEMBERS):
                archive.writestr(f"PYSEC-{number}.json", json.dumps(OTHER_SCHEMA_JSON))
    elif kind == ZIP_SIZE_BOMB:
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            with archive.open("PYSEC-0.json", "w", force_zip64=True) as member:
                block = b" " * (8 * 2**20)
                for _ in range(SIZE_BOMB_BYTES // len(block)):
                    member.write(block)
    elif kind == ZIP_SLIP:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("../escape.json", valid)
            archive.writestr("/tmp/absolute.json", valid)
    elif kind == TAR_SLIP:
        with tarfile.open(path, "w") as archive:
            for member_name in ("../escape.json", "/tmp/absolute.json"):
                info = tarfile.TarInfo(member_name)
                info.size = len(valid)
                archive.addfile(info, io.BytesIO(valid))
            link = tarfile.TarInfo("link")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc"
            archive.addfile(link)
    else:
        raise ValueError(f"no hostile file kind {kind!r}")
    return path
