"""Test media made with the standard library: PNGs (a solid colour, a full-range checkerboard) and a
pure-tone WAV."""
import base64
import io
import math
import struct
import wave
import zlib


def png(rows: list[bytes], width: int) -> bytes:
    """An 8-bit RGB PNG (no interlace) of `rows`, each `width` pixels of 3 bytes."""
    pixels = zlib.compress(b"".join(b"\x00" + row for row in rows))  # filter byte 0, then the pixels

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, len(rows), 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


def solid_png(rgb: tuple[int, int, int], size: int = 32) -> bytes:
    """A size x size PNG of one colour."""
    return png([bytes(rgb) * size] * size, size)


def checkerboard_png(size: int = 256, cell: int = 8) -> bytes:
    """A size x size black-and-white checkerboard at full range (0 and 255 in every channel), cells
    of `cell` pixels: every patch a vision encoder cuts holds the largest contrast a picture can.
    Cells of 8 in 256 keep edges inside each 48-pixel patch of Gemma 4 12B's embedder whether the
    processor enlarges the picture (up to sixfold) or shrinks it (a 1-pixel board would blur to grey)."""
    black, white = b"\x00\x00\x00" * cell, b"\xff\xff\xff" * cell
    cells = size // cell
    even = (black + white) * (cells // 2) + black * (cells % 2)
    odd = (white + black) * (cells // 2) + white * (cells % 2)
    return png([even if (y // cell) % 2 == 0 else odd for y in range(cells * cell)], cells * cell)


def tone_wav(frequency_hz: float = 440.0, seconds: float = 1.0, rate: int = 16000) -> bytes:
    """A mono 16-bit PCM WAV of a sine tone at half amplitude."""
    frames = bytearray()
    for n in range(int(seconds * rate)):
        sample = int(16383 * math.sin(2 * math.pi * frequency_hz * n / rate))
        frames += struct.pack("<h", sample)
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(bytes(frames))
    return out.getvalue()


def data_url(mime: str, payload: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(payload).decode('ascii')}"


def b64(payload: bytes) -> str:
    return base64.b64encode(payload).decode("ascii")
