"""The smoke test's generated media, read back with independent decoders."""
import base64
import io
import struct
import wave
import zlib

from buildtool.smoke.checks import CHECKS
from buildtool.smoke.media import checkerboard_png, solid_png, tone_wav


def png_chunks(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset = 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset:offset + 4])
        kind, body = data[offset + 4:offset + 8], data[offset + 8:offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length:offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        yield kind, body
        offset += 12 + length


def test_png_is_a_valid_solid_square_of_the_colour():
    chunks = dict(png_chunks(solid_png((255, 0, 0), size=16)))
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (width, height, depth, colour_type) == (16, 16, 8, 2)
    rows = zlib.decompress(chunks[b"IDAT"])
    assert len(rows) == 16 * (1 + 16 * 3)
    for y in range(16):
        row = rows[y * 49:(y + 1) * 49]
        assert row[0] == 0 and row[1:] == b"\xff\x00\x00" * 16


def test_checkerboard_is_black_and_white_at_full_range_in_cells():
    chunks = dict(png_chunks(checkerboard_png(size=64, cell=8)))
    width, height, depth, colour_type = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (width, height, depth, colour_type) == (64, 64, 8, 2)
    rows = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 64 * 3
    assert len(rows) == 64 * stride
    for y in range(64):
        row = rows[y * stride:(y + 1) * stride]
        assert row[0] == 0
        pixels = [row[1 + 3 * x:4 + 3 * x] for x in range(64)]
        for x, pixel in enumerate(pixels):
            white = ((x // 8) + (y // 8)) % 2 == 1
            assert pixel == (b"\xff\xff\xff" if white else b"\x00\x00\x00"), (x, y)


def test_the_contrast_probe_sends_the_default_checkerboard():
    (check,) = [c for c in CHECKS if c.name == "image-contrast"]
    url = check.body["messages"][0]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    chunks = dict(png_chunks(base64.b64decode(url.split(",", 1)[1])))
    assert struct.unpack(">II", chunks[b"IHDR"][:8]) == (256, 256)
    assert set(zlib.decompress(chunks[b"IDAT"])) == {0, 255}


def test_wav_is_a_440_hz_tone():
    with wave.open(io.BytesIO(tone_wav(440.0, seconds=1.0, rate=16000))) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        samples = struct.unpack(f"<{wav.getnframes()}h", wav.readframes(wav.getnframes()))
    rising_zero_crossings = sum(1 for a, b in zip(samples, samples[1:]) if a < 0 <= b)
    assert abs(rising_zero_crossings - 440) <= 1
    assert 16000 < max(samples) < 16500


def test_checks_are_deterministic_requests():
    for check in CHECKS:
        body = check.request_body("some/model")
        if body is None:
            continue
        assert body["model"] == "some/model" and body["temperature"] == 0
        assert body["messages"][0]["role"] == "user"
