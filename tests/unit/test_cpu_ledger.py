"""bench/ci_cpu's attribution (tooling/cpu_ledger.py) on sampled process tables and cgroup counters."""
from tooling.cpu_ledger import BUILD_STEPS, Ledger, Proc, container_id, host_category

SERVING = ("python3", "-m", "pytest", "--junitxml=reports/junit-serving.xml", "tests/serving")
OTHERS = ("python3", "-m", "pytest", "--junitxml=reports/junit.xml", "tests/unit", "tests/docs", "tests/image")


def table(*rows) -> dict[int, Proc]:
    return {pid: Proc(pid, ppid, seconds, argv, cgroup) for pid, ppid, seconds, argv, cgroup in rows}


def test_a_process_is_charged_to_its_nearest_named_ancestor():
    procs = table((1, 0, 0, ("init",), "/"), (10, 1, 0, OTHERS, "/"), (11, 10, 0, ("python3", "build.py", "build"), "/"),
                  (12, 11, 0, ("docker", "buildx", "build"), "/"), (20, 1, 0, SERVING, "/"), (21, 20, 0, ("docker", "compose"), "/"),
                  (30, 1, 0, ("sshd",), "/"))
    assert host_category(12, procs).startswith("build.py")
    assert host_category(10, procs).startswith("unit, docs, image")
    assert host_category(21, procs).startswith("serving tier")
    assert host_category(30, procs).startswith("other host processes")
    assert host_category(12, procs, root=10).startswith("build.py")  # the measured command's tree
    assert host_category(21, procs, root=10).startswith("host processes outside the command")
    engine = table((1, 0, 0, ("init",), "/"), (5, 1, 0, ("/usr/sbin/dockerd",), "/"), (6, 5, 0, ("containerd",), "/"))
    assert host_category(6, engine, root=10).startswith("Docker engine")


def test_containers_and_build_steps_are_told_apart_by_their_cgroup():
    assert container_id("/docker/abc123") == "abc123"
    assert container_id("/docker/buildkit/xyz") is None and container_id("/") is None


def test_each_sample_charges_the_time_since_the_last_and_new_ones_whole():
    ledger = Ledger(name_of_container={"c1": "vllm-turing-cpu:0.32.0"}.get)
    first = table((1, 0, 5.0, ("init",), "/"), (10, 1, 100.0, OTHERS, "/"))
    assert ledger.add_sample(0.0, first, {"/docker/c1": 50.0}) == {}  # the baseline: nothing charged
    later = table((1, 0, 5.0, ("init",), "/"), (10, 1, 103.0, OTHERS, "/"), (11, 10, 2.0, ("python3", "build.py"), "/"),
                  (40, 1, 9.0, ("vllm", "serve"), "/docker/c1"))  # in a container: its cgroup counts it
    interval = ledger.add_sample(2.0, later, {"/docker/c1": 51.5, "/docker/buildkit/s1": 4.0})
    assert interval == {"unit, docs, image and gpu tiers (pytest and its host children)": 3.0,
                        "build.py on the host (BuildKit's steps apart)": 2.0,
                        "container of vllm-turing-cpu:0.32.0": 1.5, BUILD_STEPS: 4.0}
    assert ledger.seconds == interval and len(ledger.timeline) == 2


def test_a_child_that_ends_between_samples_is_counted_once_through_its_parents_wait():
    init, pytest_at = Proc(1, 0, 0.0, ("init",), "/"), (lambda children: Proc(10, 1, 1.0, OTHERS, "/", children))
    ledger = Ledger()
    ledger.add_sample(0.0, {1: init, 10: pytest_at(0.0)}, {})
    ledger.add_sample(1.0, {1: init, 10: pytest_at(0.0), 11: Proc(11, 10, 2.0, ("python3", "-c", "x"), "/")}, {})
    # 11 ends having used 3.0 s in all, and a child that came and went between two samples used 0.5 s;
    # pytest waited for both: its children time is 3.5 s
    ledger.add_sample(2.0, {1: init, 10: pytest_at(3.5)}, {})
    assert ledger.seconds == {"unit, docs, image and gpu tiers (pytest and its host children)": 3.5}


def test_the_samplers_own_time_is_apart_and_the_command_it_waits_for_is_the_commands():
    init, bench = Proc(1, 0, 0.0, ("init",), "/"), (lambda own, children: Proc(5, 1, own, ("bench/ci_cpu",), "/", children))
    ledger = Ledger(sampler=5)
    ledger.add_sample(0.0, {1: init, 5: bench(1.0, 0.0)}, {})
    ledger.follow(10)
    ledger.add_sample(1.0, {1: init, 5: bench(1.2, 0.0), 10: Proc(10, 5, 2.0, ("bash", ".ci/run"), "/")}, {})
    ledger.add_sample(2.0, {1: init, 5: bench(1.3, 2.5)}, {})  # the command ended at 2.5 s; bench waited for it
    assert {k: round(v, 6) for k, v in ledger.seconds.items()} == {"bench/ci_cpu itself (sampling)": 0.3,
                                                                   "other host processes of the command": 2.5}


def test_the_engines_children_are_its_containers_and_build_steps_counted_by_their_cgroups_not_twice():
    init, engine = Proc(1, 0, 0.0, ("init",), "/"), (lambda own, children: Proc(5, 1, own, ("dockerd",), "/", children))
    step = lambda used: Proc(40, 5, used, ("/bin/sh", "-c", "python3 -m patches.fitcheck.image_passes"), "/docker/buildkit/s1")
    ledger = Ledger()
    ledger.add_sample(0.0, {1: init, 5: engine(10.0, 0.0)}, {})
    ledger.add_sample(1.0, {1: init, 5: engine(10.5, 0.0), 40: step(1.0)}, {"/docker/buildkit/s1": 300.0})
    # the step's shell ends; it had waited for the compile workers: the engine reaps 700 s of children
    ledger.add_sample(2.0, {1: init, 5: engine(10.7, 700.0)}, {"/docker/buildkit/s1": 700.0})
    assert {k: round(v, 6) for k, v in ledger.seconds.items()} == {"Docker engine (dockerd, containerd, their shims and "
                                                                   "proxies)": 0.7, BUILD_STEPS: 700.0}


def test_a_containers_time_is_counted_once_when_init_reaps_its_shim():
    """docker run: the container's process (its cgroup counts it) is reaped by its shim, and the shim, which
    daemonized, by init, outside the command: init's children time grows by the container's whole time."""
    init = lambda children: Proc(1, 0, 1.0, ("/sbin/init",), "/", children)
    shim = lambda children: Proc(7, 1, 0.1, ("/usr/bin/containerd-shim-runc-v2", "-namespace", "moby"), "/", children)
    ledger = Ledger(name_of_container={"c1": "vllm-turing-os:bookworm"}.get)
    ledger.add_sample(0.0, {1: init(0.0)}, {})
    ledger.follow(10)
    ledger.add_sample(1.0, {1: init(0.0), 7: shim(0.0), 40: Proc(40, 7, 2.0, ("sh", "-c", "loop"), "/docker/c1")},
                      {"/docker/c1": 2.0})
    # the container ends at 4.0 s; its shim reaps it and exits; init reaps the shim: 4.1 s of children
    ledger.add_sample(3.0, {1: init(4.1)}, {})
    assert {k: round(v, 6) for k, v in ledger.seconds.items()} == {
        "container of vllm-turing-os:bookworm": 2.0, "Docker engine (dockerd, containerd, their shims and proxies)": 0.1}, \
        "the cgroup counted the container's 2.0 s up to its last sample; init's reaping adds nothing"
