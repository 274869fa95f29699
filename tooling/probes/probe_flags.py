"""What both probe commands take: the image, the devices (contract/devices.py) and the families, each
name checked before any container starts."""
import argparse

from contract.devices import DEVICES
from contract.pins import PYPI_BASE_TAG


def probe_parser(prog: str, description: str, families: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default=PYPI_BASE_TAG)
    parser.add_argument("--devices", default="sm75,sm86")
    parser.add_argument("--families", default=",".join(families))
    parser.add_argument("--json", action="store_true", help="print every launch as JSON lines")
    return parser


def chosen(parser: argparse.ArgumentParser, args, families: tuple[str, ...]) -> tuple[list[str], dict]:
    """(--families, {name: DeviceLimits} of --devices); an unknown name is a usage error (exit 2)."""
    family_names, device_names = args.families.split(","), args.devices.split(",")
    unknown = [name for name in family_names if name not in families]
    unknown += [name for name in device_names if name not in DEVICES]
    if unknown:
        parser.error(f"unknown family or device {', '.join(unknown)}: families {', '.join(families)}; "
                     f"devices {', '.join(DEVICES)}")
    return family_names, {name: DEVICES[name] for name in device_names}
