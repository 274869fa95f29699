"""door/archives.py: zip and tar members judged from the listing (count, names, kinds, sizes) before a
byte is read; every refusal one line naming the archive."""
import io
import os
import stat
import tarfile
import time
import zipfile

import pytest

from door.archives import Limits, open_tar, open_zip
from door.problem import Problem
from tests.support.zip_bomb import bomb_zip

LIMITS = Limits(member_cap=4 * 2**20, max_members=1000, total_cap=64 * 2**20)


def refused(opener, path, limits=LIMITS) -> str:
    with pytest.raises(Problem) as problem:
        with opener(str(path), "db.zip", limits):
            pass
    assert "\n" not in str(problem.value) and str(problem.value).startswith("db.zip")
    return str(problem.value)


def test_a_zips_members_are_listed_and_read_whole(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("PyPI/", b"")
        archive.writestr("PyPI/PYSEC-1.json", b'{"id": "PYSEC-1"}')
    with open_zip(str(path), "db.zip", LIMITS) as archive:
        assert [m.name for m in archive.members] == ["PyPI/PYSEC-1.json"]
        assert archive.read(archive.members[0]) == b'{"id": "PYSEC-1"}'


@pytest.mark.parametrize("member, said", [("../escape.json", "climbs out"), ("/abs.json", "absolute"),
                                          ("a\\..\\b.json", "backslash"), ("C:/x.json", "absolute")])
def test_a_zip_member_named_outside_the_archive_is_refused(tmp_path, member, said):
    path = tmp_path / "slip.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, b"{}")
    assert said in refused(open_zip, path)


def test_a_symlink_member_is_refused(tmp_path):
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo("PYSEC-1.json")
        info.create_system, info.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    assert "is a symlink" in refused(open_zip, path)


def test_a_bomb_of_3000_large_members_is_refused_from_its_listing_at_once(tmp_path):
    path = bomb_zip(tmp_path / "bomb.zip", members=3000, size=4 * 2**20)  # 12 GiB unpacked, some MiB packed
    started = time.monotonic()
    assert "unpacks to more than 64 MiB" in refused(open_zip, path, Limits(4 * 2**20, 5000, 64 * 2**20))
    assert "has 3000 members, more than the 1000" in refused(open_zip, path, Limits(4 * 2**20, 1000, 2**40))
    assert "more than the 1 MiB one member can be" in refused(open_zip, path, Limits(2**20, 5000, 2**40))
    assert time.monotonic() - started < 30  # read nothing: the listing alone (a loaded host's slack)


def test_a_fifo_and_a_file_that_is_no_zip_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.zip")
    assert "named pipe" in refused(open_zip, tmp_path / "fifo.zip")
    (tmp_path / "text.zip").write_bytes(b"not a zip at all")
    assert "not a zip archive" in refused(open_zip, tmp_path / "text.zip")


def test_a_member_shorter_than_its_listing_is_refused_on_read(tmp_path):
    path = tmp_path / "short.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a.json", b"x" * 100)
    data = bytearray(path.read_bytes())
    at = data.rfind(b"PK\x01\x02")  # the central directory's uncompressed size: 100 -> 200
    data[at + 24:at + 28] = (200).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with open_zip(str(path), "db.zip", LIMITS) as archive:
        with pytest.raises(Problem, match="db.zip: a.json"):
            archive.read(archive.members[0])


def tar_with(path, *infos):
    with tarfile.open(path, "w:gz") as archive:
        for info, data in infos:
            archive.addfile(info, io.BytesIO(data) if data else None)
    return path


def test_a_tars_regular_members_are_read_and_its_links_and_slips_refused(tmp_path):
    good = tarfile.TarInfo("model/config.json")
    good.size = 2
    with open_tar(str(tar_with(tmp_path / "a.tgz", (good, b"{}"))), "m.tgz", LIMITS) as archive:
        assert [archive.read(m) for m in archive.members] == [b"{}"]
    link = tarfile.TarInfo("model/weights")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    slip = tarfile.TarInfo("../../escape.json")
    for info, said in [(link, "is a symlink"), (slip, "climbs out")]:
        with pytest.raises(Problem, match=said):
            with open_tar(str(tar_with(tmp_path / "b.tgz", (info, b""))), "m.tgz", LIMITS):
                pass


def test_a_member_is_copied_in_pieces_and_a_full_disk_is_the_sinks_error_not_the_archives(tmp_path):
    payload = bytes(range(256)) * 4096  # 1 MiB
    info = tarfile.TarInfo("model/model.safetensors")
    info.size = len(payload)
    with open_tar(str(tar_with(tmp_path / "m.tgz", (info, payload))), "m.tgz", LIMITS) as archive:
        with open(tmp_path / "out", "wb") as sink:
            archive.copy(archive.members[0], sink)
        assert (tmp_path / "out").read_bytes() == payload
        with open("/dev/full", "wb", buffering=0) as full, pytest.raises(OSError) as failed:
            archive.copy(archive.members[0], full)
        assert not isinstance(failed.value, Problem)


def test_a_compressed_tar_declaring_a_tib_member_is_refused_at_its_header(tmp_path):
    import gzip

    info = tarfile.TarInfo("model/model.safetensors")
    info.size = 2**40
    path = tmp_path / "tib.tgz"
    path.write_bytes(gzip.compress(info.tobuf(format=tarfile.GNU_FORMAT) + bytes(2**20)))  # a header, a MiB
    with pytest.raises(Problem, match=r"^m\.tgz: the member 'model/model\.safetensors' is 1099511627776 bytes"):
        with open_tar(str(path), "m.tgz", LIMITS):
            pass
