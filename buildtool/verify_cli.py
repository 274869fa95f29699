"""`build.py verify IMAGE`: the checks an image passes before build.py tags it."""
from buildtool.engine import connect, image_or_none
from buildtool.errors import BuildError
from buildtool.verify import verify_image


def add_arguments(parser) -> None:
    parser.add_argument("image", help="image reference or ID")


def run(args) -> int:
    client = connect()
    if image_or_none(client, args.image) is None:
        raise BuildError(f"no image {args.image} here: build it with `python3 build.py` or pull it", 2)
    findings = verify_image(client, args.image)
    for finding in findings:
        print(f"{'ok  ' if finding.ok else 'FAIL'} {finding.name}: {finding.detail}")
    return 0 if all(f.ok for f in findings) else 1
