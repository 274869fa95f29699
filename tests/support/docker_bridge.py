"""The host's address on Docker's default bridge: a container on that bridge (a build step, a `docker
run` with no --network) reaches a server listening there; the loopback it does not, and no other
machine reaches the bridge's address."""
from __future__ import annotations


def bridge_gateway(client) -> str:
    """`client`: a docker SDK client (docker.from_env())."""
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or config["Subnet"].rsplit(".", 2)[0] + ".0.1"
