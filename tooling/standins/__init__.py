"""Stand-ins that the benches and the tests share: doubles for what cannot exist on a CPU machine."""
