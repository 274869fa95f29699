"""Test media made with the standard library: a solid-colour PNG and a pure-tone WAV."""
import base64
import io
import math
import struct
import wave
import zlib


def solid_png(rgb: tuple[int, int, int], size: int = 32) -> bytes:
    """A size x size PNG of one colour (8-bit RGB, no interlace)."""
    row = b"\x00" + bytes(rgb) * size  # filter byte 0, then the pixels
    pixels = zlib.compress(row * size)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
            + chunk(b"IEND", b""))


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
