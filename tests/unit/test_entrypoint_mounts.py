"""The mount a cache lives on (entrypoint/mounts.py) and the cache check's refusal of a noexec mount
for the caches the server loads compiled code from: real mountinfo texts, and one real tmpfs."""
from hypothesis import given, strategies as st

from contract.verdict import Status
from entrypoint import mounts
from entrypoint.checks import cache
from tests.unit.test_entrypoint_cache_agreement import tmpfs  # noqa: F401  (a real tmpfs, mounted by the test)

# A container's mountinfo as Docker writes it: a named volume, the default noexec tmpfs, /dev/shm.
DOCKER = """\
812 700 0:52 / / rw,relatime master:315 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B
813 812 0:55 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
820 812 0:57 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755
826 820 0:54 / /dev/shm rw,nosuid,nodev,noexec,relatime - tmpfs shm rw,size=65536k
830 812 254:0 /var/lib/docker/volumes/vllm-turing_triton-cache-0.33.0/_data /opt/vllm-turing/triton-cache rw,relatime master:1 - ext4 /dev/vda rw
831 812 0:60 / /cache/vllm rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,size=3145728k
832 812 254:0 /srv/models /models ro,relatime - ext4 /dev/vda rw
833 812 0:61 / /srv/with\\040space rw,noexec - tmpfs tmpfs rw
"""


def test_the_longest_mount_point_prefix_holds_a_path():
    mounted = mounts.parse_mountinfo(DOCKER)
    assert mounts.mount_of("/cache/vllm/torch_compile_cache/x", mounted).mount_point == "/cache/vllm"
    assert mounts.mount_of("/cache/vllm", mounted).noexec
    assert mounts.mount_of("/cache/vllmx", mounted).mount_point == "/"  # a prefix of the name, not of the path
    assert not mounts.mount_of("/opt/vllm-turing/triton-cache/ab", mounted).noexec
    assert mounts.mount_of("/srv/with space/a", mounted).noexec  # \040 is a space
    assert "ro" in mounts.mount_of("/models/m", mounted).options


def test_a_later_mount_over_the_same_point_hides_the_earlier():
    over = DOCKER + "900 831 0:70 / /cache/vllm rw,relatime - tmpfs tmpfs rw\n"
    assert not mounts.mount_of("/cache/vllm/a", mounts.parse_mountinfo(over)).noexec


def test_a_noexec_code_cache_fails_naming_the_mount_and_the_fix():
    result = cache.check_executable([("VLLM_CACHE_ROOT", "/cache/vllm"),
                                     ("TRITON_CACHE_DIR", "/opt/vllm-turing/triton-cache")], DOCKER)
    assert result.status is Status.FAIL and "\n" not in result.message + result.fix
    assert "VLLM_CACHE_ROOT /cache/vllm is on /cache/vllm (tmpfs), mounted noexec" in result.message
    assert "TRITON_CACHE_DIR" not in result.message
    assert "exec" in result.fix and "volume" in result.fix
    assert cache.check_executable([("TRITON_CACHE_DIR", "/opt/vllm-turing/triton-cache")], DOCKER) is None


def test_no_mountinfo_judges_nothing():
    assert cache.check_executable([("VLLM_CACHE_ROOT", "/cache/vllm")], "") is None


mount_point = st.lists(st.text("abc/ \\", min_size=1, max_size=6), min_size=0, max_size=4).map(
    lambda parts: "/" + "/".join(p.strip("/") for p in parts if p.strip("/")))
options = st.sets(st.sampled_from(["rw", "ro", "noexec", "nosuid", "nodev", "relatime"]), min_size=1)


def escaped(path: str) -> str:
    return path.replace("\\", "\\134").replace(" ", "\\040")


@given(st.lists(st.tuples(mount_point, options), min_size=1, max_size=8), mount_point)
def test_the_chosen_mount_is_the_longest_prefix_of_any_generated_table(table, path):
    text = "".join(f"{i} 1 0:{i} / {escaped(point)} {','.join(sorted(opts))} - tmpfs src rw\n"
                   for i, (point, opts) in enumerate(table))
    mounted = mounts.parse_mountinfo(text)
    assert [m.mount_point for m in mounted] == [point for point, _ in table]
    chosen = mounts.mount_of(path, mounted)
    holders = [m for m in mounted if path == m.mount_point or m.mount_point == "/"
               or path.startswith(m.mount_point + "/")]
    if not holders:
        assert chosen is None
    else:
        longest = max(len(m.mount_point) for m in holders)
        assert chosen == [m for m in holders if len(m.mount_point) == longest][-1]


@given(st.text(max_size=300))
def test_any_text_parses_without_raising(text):
    for mount in mounts.parse_mountinfo(text):
        assert mount.mount_point.startswith("/")


def test_a_real_noexec_mount_fails_the_cache_check_before_any_load(tmp_path, tmpfs):
    noexec_tmpfs = tmpfs("tmpfs", "size=16m,noexec")  # as Docker mounts one
    root = noexec_tmpfs / "vllm"  # missing: created on the noexec mount
    result = cache.check_cache(str(root), cache.Identity({}, "a" * 64))
    assert result.status is Status.FAIL and f"on {noexec_tmpfs} (tmpfs), mounted noexec" in result.message
    link = tmp_path / "link"
    link.symlink_to(noexec_tmpfs)  # a symlink into the mount resolves to it
    assert cache.check_executable([("VLLM_CACHE_ROOT", str(link / "vllm"))]).status is Status.FAIL
    assert cache.check_executable([("VLLM_CACHE_ROOT", str(tmp_path / "elsewhere"))]) is None
