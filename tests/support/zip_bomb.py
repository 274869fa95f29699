"""A real zip bomb, built fast: one member's deflated zeros written `members` times under their own
names (a zip's members may share nothing but this), with a true central directory."""
import struct
import zlib
from pathlib import Path


def bomb_zip(path: Path, members: int, size: int) -> Path:
    data = bytes(size)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = packer.compress(data) + packer.flush()
    crc = zlib.crc32(data)
    local, central = bytearray(), bytearray()
    for n in range(members):
        name = f"PYSEC-{n:05d}.json".encode()
        offset = len(local)
        local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0x21, crc, len(packed), size, len(name), 0)
        local += name + packed
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0x21, crc, len(packed), size,
                               len(name), 0, 0, 0, 0, 0, offset) + name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, members, members, len(central), len(local), 0)
    path.write_bytes(bytes(local + central + end))
    return path
