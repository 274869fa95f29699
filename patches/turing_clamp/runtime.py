"""The code the clamp inserts into vLLM's triton_unified_attention.py and triton_prefill_attention.py.

Everything between the two marker lines is copied verbatim, before each launcher (unified_attention,
context_attention_fwd), by patches/turing_clamp (placement.py); this module exists so that the very
same text can be imported and tested without vLLM. Names start with `_vllm_turing_` so that they
cannot collide with vLLM's own.
"""
# >>> vllm-turing clamp: sizes attention tiles by the device's shared memory (patches/turing_clamp)
_VLLM_TURING_CLAMP_VERSION = 5
_vllm_turing_clamp_cache = {}
_vllm_turing_fit_tables = {}
# Launches without a fit-table entry: {launch key: the tile Triton accepted}, and the 3D kernel's
# last {vLLM's tile: tile used}, which its split-K reduction must repeat.
_vllm_turing_stepped = {}
_vllm_turing_decode_tile = {}
_VLLM_TURING_KERNELS = ("kernel_unified_attention", "kernel_unified_attention_2d",
                        "kernel_unified_attention_3d", "reduce_segments")
# The encoder launcher's kernel (context_attention_fwd) and its fit-table path.
_VLLM_TURING_ENCODER_KERNEL = "_fwd_kernel"
_VLLM_TURING_ENCODER_PATH = "encoder"
_VLLM_TURING_SMALLEST_TILE = 16
# (name, the name of the first release, still read when the name is unset); the image's default table
_VLLM_TURING_ENV_SMEM_LIMIT = ("TURING_CLAMP_SMEM_LIMIT", "VLLM_TURING_SMEM_LIMIT")
_VLLM_TURING_ENV_CC = ("TURING_CLAMP_CC", "VLLM_TURING_CC")
_VLLM_TURING_ENV_FIT_TABLE = ("TURING_CLAMP_FIT_TABLE", "VLLM_TURING_FIT_TABLE")
_VLLM_TURING_DEFAULT_FIT_TABLE = "/opt/vllm-turing/fit-table.json"
# Ranked launch configurations (tooling/clamp_ranking.py writes them; the image copies patches/ here)
_VLLM_TURING_ENV_RANKED = ("TURING_CLAMP_RANKED_CONFIGS",)
# The image's copy; the build's fit check launches through it, so its proof and its table hold the
# ranked launches. TURING_CLAMP_RANKED_CONFIGS names another file, or "" for none.
_VLLM_TURING_DEFAULT_RANKED = "/opt/vllm-turing/patches/turing_clamp/ranked-configs.json"
_VLLM_TURING_KEEP_MARGIN = 1.05
_VLLM_TURING_RANKED_FORMAT = 2
_vllm_turing_ranked_tables = {}
# {IS_3D: {"num_warps": ..., "num_stages": ...}} of the launch being made, set by each clamp call
_vllm_turing_path_options = {}
# {"num_warps": ..., "num_stages": ...} a ranked configuration gives the encoder launch being made
_vllm_turing_encoder_options = {}


def _vllm_turing_env(names, default=None):
    """(name read, value) of the first of names that is set; (names[0], default) when none is."""
    import os

    for name in names:
        if name in os.environ:
            return name, os.environ[name]
    return names[0], default


def _vllm_turing_release():
    import importlib.metadata

    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _vllm_turing_limit(q):
    """(compute capability, shared-memory limit in bytes or None) for q's device."""
    name, raw = _vllm_turing_env(_VLLM_TURING_ENV_SMEM_LIMIT, "")
    raw = raw.strip()
    if raw:
        if not raw.isdigit() or int(raw) <= 0:
            raise ValueError(
                f"{name}={raw!r} is not a byte count; expected a "
                "positive integer such as 65536; fix or unset it"
            )
        limit = int(raw)
    else:
        limit = None
    if q.device.type == "cuda":
        import torch

        props = torch.cuda.get_device_properties(q.device)
        cc = _vllm_turing_lowering_cc(props.major * 10 + props.minor)
        return cc, limit if limit is not None else props.shared_memory_per_block_optin
    return int(_vllm_turing_env(_VLLM_TURING_ENV_CC, "75")[1]), limit


def _vllm_turing_lowering_cc(cc):
    """The capability Triton lowers for: TRITON_OVERRIDE_ARCH's (smNN) when set, else the device's.
    Triton then sizes shared memory as on that GPU, so its fit-table entries hold (a measuring
    tool on a larger GPU: the preflight refuses the override in the product)."""
    import os
    import re

    match = re.fullmatch(r"sm(\d+)", os.environ.get("TRITON_OVERRIDE_ARCH", "").strip())
    return int(match.group(1)) if match else cc


def _vllm_turing_fit_table():
    """{(cc, path, head_size_padded, dtype, block_m, num_warps, num_stages): {tile: shared}}"""
    import json
    import os

    path = _vllm_turing_env(_VLLM_TURING_ENV_FIT_TABLE, _VLLM_TURING_DEFAULT_FIT_TABLE)[1]
    if path in _vllm_turing_fit_tables:
        return path, _vllm_turing_fit_tables[path]
    table = {}
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
            assert document["format"] == 1, f"format {document['format']!r}, expected 1"
            for e in document["entries"]:
                key = (e["cc"], e["path"], e["head_size_padded"], e["dtype"],
                       e["block_m"], e["num_warps"], e["num_stages"])
                table.setdefault(key, {})[int(e["tile_size"])] = int(e["shared"])
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            raise RuntimeError(
                f"vllm-turing fit table {path} is unreadable ({exc!r}); rebuild it "
                "with `python -m patches.fitcheck --write-table PATH`"
            ) from None
    _vllm_turing_fit_tables[path] = table
    return path, table


def _vllm_turing_needs(table, cc, launch):
    """{tile: shared} for one launch on cc; the largest need over all cc when cc has none."""
    needs = table.get((cc,) + launch)
    if needs:
        return needs
    merged = {}
    for key, by_tile in table.items():
        if key[1:] == launch:
            for tile, shared in by_tile.items():
                merged[tile] = max(shared, merged.get(tile, 0))
    return merged


def _vllm_turing_pick(needs, default, limit):
    """Largest tile not above default whose need is within limit; None when none is."""
    fitting = [t for t, shared in needs.items() if t <= default and shared <= limit]
    return max(fitting) if fitting else None


def _vllm_turing_fit_path(table, cc, limit, launch, default, stages, adjust_stages):
    """(tile, num_stages) for one path (launch without num_stages); None when nothing fits."""
    needs = _vllm_turing_needs(table, cc, launch + (stages,))
    if default not in needs:
        return default, stages, False  # no entry: the launch is judged by Triton (guarded)
    tile = _vllm_turing_pick(needs, default, limit)
    if tile is not None:
        return tile, stages, True
    if adjust_stages:
        # Fewer pipeline stages need less shared memory: try the table's explicit ones.
        explicit = {key[-1] for key in table if key[1:-1] == launch and isinstance(key[-1], int)}
        for fewer in sorted((s for s in explicit if stages is None or s < stages), reverse=True):
            tile = _vllm_turing_pick(_vllm_turing_needs(table, cc, launch + (fewer,)), default, limit)
            if tile is not None:
                return tile, fewer, True
    return None, stages, True


def _vllm_turing_ranked():
    """{(cc, path, head_size_padded, dtype, block_m, num_warps, num_stages, vLLM's tile, windowed): [(tile,
    num_warps, num_stages, shared, score), ...] best first} from the ranked-configurations file, and for
    the encoder kernel {("encoder", cc, head_size_padded, dtype, vLLM's BLOCK): ((vLLM's num_warps,
    num_stages), [rows as above])}; {} without one, for another vLLM release, or unreadable (then one
    warning): the fit table alone decides."""
    import json
    import os

    path = _vllm_turing_env(_VLLM_TURING_ENV_RANKED, _VLLM_TURING_DEFAULT_RANKED)[1]
    if path in _vllm_turing_ranked_tables:
        return _vllm_turing_ranked_tables[path]
    ranked = {}
    if path and os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
            assert document["format"] == _VLLM_TURING_RANKED_FORMAT, \
                f"format {document['format']!r}, expected {_VLLM_TURING_RANKED_FORMAT}"
            if document["vllm_version"] == _vllm_turing_release():
                for e in document["launches"]:
                    rows = [(int(r["tile_size"]), r["num_warps"], r["num_stages"], int(r["shared"]),
                             float(r["score"])) for r in e["ranked"]]
                    if e["path"] == _VLLM_TURING_ENCODER_PATH:
                        key = (e["path"], e["cc"], e["head_size_padded"], e["dtype"], e["vllm_tile_size"])
                        ranked[key] = ((e["num_warps"], e["num_stages"]), rows)
                        continue
                    key = (e["cc"], e["path"], e["head_size_padded"], e["dtype"], e["block_m"],
                           e["num_warps"], e["num_stages"], e["vllm_tile_size"], bool(e["windowed"]))
                    ranked[key] = rows
        except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
            import logging

            ranked = {}
            logging.getLogger(__name__).warning(
                "vllm-turing clamp: ranked configurations %s are unreadable (%r); the fit table "
                "alone decides. Restore the file from patches/turing_clamp or unset %s",
                path, exc, _VLLM_TURING_ENV_RANKED[0])
    _vllm_turing_ranked_tables[path] = ranked
    return ranked


def _vllm_turing_best_fitting(rows, need_key, table, limit, fail_safe):
    """(tile, num_warps, num_stages, need known from the fit table) of the best-scored ranked row
    that fits limit, or None when none does; the row `fail_safe` (tile, num_warps, num_stages)
    is taken instead when it fits and its score is within _VLLM_TURING_KEEP_MARGIN of the fastest
    measured (score 1), or, where no row that fits is, within the margin of the best that fits. (A
    ranking merged from several runs scores a row by its worst run, so its best can exceed 1.)
    A row's need is the fit table's entry at need_key(tile, num_warps, num_stages), else the one
    the ranking measured."""
    fitting = []
    for tile, warps, stages, shared, score in rows:
        known = table.get(need_key(tile, warps, stages), {}).get(tile)
        if (known if known is not None else shared) <= limit:
            fitting.append((score, tile, warps, stages, known is not None))
    if not fitting:
        return None
    best = fitting[0]
    kept = [f for f in fitting if f[1:4] == fail_safe]
    bound = _VLLM_TURING_KEEP_MARGIN * (1 if best[0] <= _VLLM_TURING_KEEP_MARGIN else best[0])
    if kept and kept[0][0] <= bound:
        best = kept[0]
    return best[1:]


def _vllm_turing_ranked_pick(table, cc, limit, launch, stages, default, fail_safe, windowed):
    """(tile, num_stages, {launch options}, need known from the fit table) the ranked configurations
    choose for one path, or None when they rank nothing for it or nothing they rank fits.
    launch = (path, head_size_padded, dtype, block_m, num_warps), stages and default (its tile) are vLLM's;
    windowed whether the layer has a sliding window (None: the launcher did not say, so nothing is ranked); fail_safe
    is the (tile, num_stages) the fit table alone chose, kept unless a fitting configuration's
    score is more than _VLLM_TURING_KEEP_MARGIN better. A configuration's need is the fit table's
    entry for it on cc, else the need the ranking measured (then the launch is guarded)."""
    best = _vllm_turing_best_fitting(
        _vllm_turing_ranked().get((cc,) + launch + (stages, default, windowed), ()),
        lambda tile, warps, ranked_stages: (cc,) + launch[:4] + (
            launch[-1] if warps is None else warps, stages if ranked_stages is None else ranked_stages),
        table, limit, None if fail_safe is None else (fail_safe[0], launch[-1], fail_safe[1]))
    if best is None:
        return None
    tile, warps, ranked_stages, known = best
    chosen = {name: value for name, value in (("num_warps", warps), ("num_stages", ranked_stages))
              if value is not None and value != {"num_warps": launch[-1], "num_stages": stages}[name]}
    return tile, ranked_stages if ranked_stages is not None else stages, chosen, known


def _vllm_turing_with_options(name, kwargs):
    """kwargs with the ranked num_warps / num_stages of this launch's path, if it has any."""
    options = _vllm_turing_path_options.get(bool(kwargs.get("IS_3D")) or name.endswith("_3d"))
    return dict(kwargs, **options) if options else kwargs


def _vllm_turing_decide(q, block_m, tile_prefill, tile_decode, num_warps, num_stages, adjust_stages, windowed):
    cc, limit = _vllm_turing_limit(q)
    if limit is None:
        return tile_prefill, tile_decode, num_stages, False, {}
    table_path, table = _vllm_turing_fit_table()
    head = q.shape[2]
    head_padded = 1 << (head - 1).bit_length()
    dtype = str(q.dtype).replace("torch.", "")
    chosen, unknown, guarded, options = {}, [], False, {}
    for path, default in (("2d", tile_prefill), ("3d", tile_decode)):
        launch = (path, head_padded, dtype, block_m, num_warps)
        tile, stages, known = _vllm_turing_fit_path(
            table, cc, limit, launch, default, num_stages, adjust_stages
        )
        pick = _vllm_turing_ranked_pick(
            table, cc, limit, launch, num_stages, default, (tile, stages) if known and tile is not None else None,
            windowed)
        if pick is not None:
            tile, stages, options[path == "3d"], pick_known = pick
            guarded = guarded or not pick_known
        elif not known:
            unknown.append(path)
        elif tile is None:
            smallest = min(_vllm_turing_needs(table, cc, launch + (num_stages,)).values())
            raise RuntimeError(
                f"vllm-turing clamp: no attention tile fits for head size {head} ({dtype}, "
                f"{path} path): the smallest needs {smallest} bytes of shared memory, the "
                f"limit is {limit} bytes (vLLM {_vllm_turing_release()}); use a GPU with "
                "more shared memory per block or a model with a smaller head size"
            )
        chosen[path] = (tile, stages)
    # One launch-stage count serves both paths: the fewer stages a path the fit table decided
    # needed (a ranked choice sets its own per path, through the launch options).
    stages = min((s for path, (_, s) in chosen.items() if s is not None and (path == "3d") not in options),
                 default=num_stages)
    options = {is_3d: o for is_3d, o in options.items() if o}
    if unknown:
        import logging

        logging.getLogger(__name__).warning(
            "vllm-turing clamp: no fit-table entry in %s for the %s launch (cc %s, head size %s, "
            "%s, BLOCK_M %s); Triton judges its tile at first launch and a tile it refuses "
            "(OutOfResources) steps down. Add the entry with `python -m patches.fitcheck "
            "--write-table PATH`", table_path, "/".join(unknown), cc, head, dtype, block_m,
        )
    return chosen["2d"][0], chosen["3d"][0], stages, bool(unknown) or guarded or bool(options), options


def _vllm_turing_next_tile(tile):
    """The tile to try after Triton refused tile; None below the smallest tile vLLM's kernels take."""
    return tile // 2 if tile // 2 >= _VLLM_TURING_SMALLEST_TILE else None


def _vllm_turing_launch_key(name, kwargs):
    """What decides a launch's shared memory besides its tile: kernel, constexpr-style arguments
    (vLLM spells them upper case), launch options and the dtypes of the tensors."""
    fixed = tuple(sorted((k, v) for k, v in kwargs.items() if k != "TILE_SIZE" and (
        k.isupper() or k in ("num_warps", "num_stages")) and isinstance(v, (bool, int, str, type(None)))))
    dtypes = tuple(sorted({str(v.dtype) for v in kwargs.values() if hasattr(v, "dtype")}))
    return (name,) + fixed + dtypes


def _vllm_turing_stepped_launch(name, kernel, grid, args, kwargs, tile, retile):
    """kernel[grid](*args, **kwargs) launched with `tile`, halved while Triton refuses it with
    OutOfResources (raised before the kernel runs); the tile accepted is remembered per launch key
    and returned with the launch's result. retile(tile) -> (grid, kwargs) of the launch at that tile."""
    from triton.runtime.errors import OutOfResources

    key = _vllm_turing_launch_key(name, kwargs) + (tile,)
    used = _vllm_turing_stepped.get(key, tile)
    while True:
        launch_grid, launch_kwargs = retile(used)
        try:
            result = kernel[launch_grid](*args, **launch_kwargs)
            break
        except OutOfResources:
            used = _vllm_turing_next_tile(used)
            if used is None:
                raise
    if key not in _vllm_turing_stepped:
        _vllm_turing_stepped[key] = used
        if used != tile:
            import logging

            logging.getLogger(__name__).warning(
                "vllm-turing clamp: Triton refused tile %s for %s (OutOfResources); "
                "tile %s from now on for this launch", tile, name, used)
    return result, used


def _vllm_turing_guarded(name, kernel):
    """kernel, launched through [grid](...) as vLLM does; a tile Triton refuses with OutOfResources
    (raised before the kernel runs) is halved until one is accepted, remembered per launch key."""

    def launch(grid, *args, **kwargs):
        tile = kwargs.get("TILE_SIZE")
        if not isinstance(tile, int):
            return kernel[grid](*args, **kwargs)
        if name != "reduce_segments" and _vllm_turing_path_options:
            kwargs = _vllm_turing_with_options(name, kwargs)
        if name == "reduce_segments":  # must repeat the tile its 3D kernel ran with
            return kernel[grid](*args, **dict(kwargs, TILE_SIZE=_vllm_turing_decode_tile.get(tile, tile)))
        result, used = _vllm_turing_stepped_launch(
            name, kernel, grid, args, kwargs, tile, lambda t: (grid, dict(kwargs, TILE_SIZE=t)))
        if name.endswith("_3d") or kwargs.get("IS_3D"):
            _vllm_turing_decode_tile.clear()
            _vllm_turing_decode_tile[tile] = used
        return result

    return _vllm_turing_wrapper(kernel, launch)


def _vllm_turing_guarded_encoder(kernel):
    """The encoder kernel, guarded as _vllm_turing_guarded does: a smaller BLOCK_M (and BLOCK_N, never
    above it) launches proportionally more query blocks on the grid's last axis; the kernel masks rows
    past each sequence, so the extra programs do nothing."""

    def launch(grid, *args, **kwargs):
        block = kwargs.get("BLOCK_M")
        if not isinstance(block, int) or not isinstance(grid, tuple) or len(grid) != 3:
            return kernel[grid](*args, **kwargs)

        def retile(used):
            block_n = kwargs.get("BLOCK_N", block)
            return (grid[0], grid[1], grid[2] * (block // used)), dict(
                kwargs, BLOCK_M=used, BLOCK_N=min(block_n, used) if isinstance(block_n, int) else block_n)

        kwargs = dict(kwargs, **_vllm_turing_encoder_options)
        return _vllm_turing_stepped_launch(_VLLM_TURING_ENCODER_KERNEL, kernel, grid, args, kwargs, block,
                                           retile)[0]

    return _vllm_turing_wrapper(kernel, launch)


def _vllm_turing_wrapper(kernel, launch):
    class Guarded:
        _vllm_turing_kernel = kernel

        def __getitem__(self, grid):
            return lambda *args, **kwargs: launch(grid, *args, **kwargs)

    return Guarded()


def _vllm_turing_guard(namespace, names=_VLLM_TURING_KERNELS):
    """Routes the launcher's kernels in namespace through their guard (once per object)."""
    for name in names:
        kernel = namespace.get(name)
        if kernel is not None and not hasattr(kernel, "_vllm_turing_kernel"):
            namespace[name] = (_vllm_turing_guarded_encoder(kernel) if name == _VLLM_TURING_ENCODER_KERNEL
                               else _vllm_turing_guarded(name, kernel))


def _vllm_turing_clamp(q, block_m, tile_prefill, tile_decode, num_warps=None, num_stages=None,
                       adjust_stages=False, sliding_window=None):
    """(TILE_SIZE_PREFILL, TILE_SIZE_DECODE, num_stages) that fit this device's shared memory.
    sliding_window is the launcher's window in tokens (0: none; None: a release that does not pass it):
    layers with and without one rank apart.

    Unchanged without a limit (no CUDA device and no TURING_CLAMP_SMEM_LIMIT) and wherever
    vLLM's own tiles fit; decided once per launch shape and device, then cached. A launch the fit
    table lacks keeps vLLM's tile and is guarded: Triton's OutOfResources steps its tile down.
    """
    windowed = None if sliding_window is None else sliding_window > 0
    key = (q.device, q.shape[2], q.dtype, block_m, tile_prefill, tile_decode, num_warps, num_stages, windowed)
    decision = _vllm_turing_clamp_cache.get(key)
    if decision is None:
        decision = _vllm_turing_decide(
            q, block_m, tile_prefill, tile_decode, num_warps, num_stages, adjust_stages, windowed
        )
        _vllm_turing_clamp_cache[key] = decision
    _vllm_turing_path_options.clear()
    _vllm_turing_path_options.update(decision[4])
    if decision[3]:
        _vllm_turing_guard(globals())
    return decision[:3]


def _vllm_turing_encoder_needs(table, cc, head_padded, dtype):
    """{BLOCK: shared} of the encoder kernel (BLOCK_M = BLOCK_N = BLOCK) for one head size on cc, the
    largest over the table's warps and stages; the largest over all cc when cc has none."""
    for wanted in (cc, None):
        needs = {}
        for key, by_tile in table.items():
            if key[1:4] == (_VLLM_TURING_ENCODER_PATH, head_padded, dtype) and wanted in (None, key[0]):
                block = key[4]
                if block in by_tile:
                    needs[block] = max(by_tile[block], needs.get(block, 0))
        if needs:
            return needs
    return {}


def _vllm_turing_decide_encoder(q, block):
    cc, limit = _vllm_turing_limit(q)
    if limit is None:
        return block, False, {}
    table_path, table = _vllm_turing_fit_table()
    head = q.shape[-1]
    head_padded = 1 << (head - 1).bit_length()
    dtype = str(q.dtype).replace("torch.", "")
    needs = _vllm_turing_encoder_needs(table, cc, head_padded, dtype)
    if block not in needs:
        import logging

        logging.getLogger(__name__).warning(
            "vllm-turing clamp: no fit-table entry in %s for the encoder attention launch (cc %s, head "
            "size %s, %s, BLOCK %s); Triton judges its tile at first launch and a tile it refuses "
            "(OutOfResources) steps down. Add the entry with `python -m patches.fitcheck "
            "--write-table PATH`", table_path, cc, head, dtype, block)
        return block, True, {}
    chosen = _vllm_turing_pick(needs, block, limit)
    pick = _vllm_turing_ranked_encoder_pick(table, cc, limit, head_padded, dtype, block, chosen)
    if pick is not None:
        return pick
    if chosen is None:
        raise RuntimeError(
            f"vllm-turing clamp: no encoder attention tile fits for head size {head} ({dtype}): the "
            f"smallest needs {min(needs.values())} bytes of shared memory, the limit is {limit} bytes "
            f"(vLLM {_vllm_turing_release()}); use a GPU with more shared memory per block or a model "
            "with a smaller head size"
        )
    return chosen, False, {}


def _vllm_turing_ranked_encoder_pick(table, cc, limit, head_padded, dtype, block, fail_safe):
    """(BLOCK, guarded, {launch options}) the ranked configurations choose for the encoder launch whose
    own BLOCK is `block`, or None when they rank nothing for it or nothing they rank fits. fail_safe
    (the fit table's BLOCK at vLLM's warps and stages, or None) stays unless a fitting configuration's
    score is more than _VLLM_TURING_KEEP_MARGIN better. A configuration's need is the fit table's,
    else the one the ranking measured (then the launch is guarded)."""
    own, rows = _vllm_turing_ranked().get((_VLLM_TURING_ENCODER_PATH, cc, head_padded, dtype, block), ((), ()))
    best = _vllm_turing_best_fitting(
        rows, lambda tile, warps, stages: (cc, _VLLM_TURING_ENCODER_PATH, head_padded, dtype, tile, warps, stages),
        table, limit, (fail_safe,) + tuple(own))
    if best is None:
        return None
    tile, warps, stages, known = best
    options = {name: value for name, value, launched in (("num_warps", warps, own[0]), ("num_stages", stages, own[1]))
               if value != launched}
    return tile, bool(options) or not known, options


def _vllm_turing_encoder_clamp(q, block):
    """context_attention_fwd's BLOCK (BLOCK_M and BLOCK_N of _fwd_kernel) that fits this device's
    shared memory: vLLM's own where it fits or no limit is known, else the largest smaller one the
    fit table says fits; no table entry: vLLM's, guarded (OutOfResources halves it). Cached per shape."""
    key = (_VLLM_TURING_ENCODER_PATH, q.device, q.shape[-1], q.dtype, block)
    decision = _vllm_turing_clamp_cache.get(key)
    if decision is None:
        decision = _vllm_turing_decide_encoder(q, block)
        _vllm_turing_clamp_cache[key] = decision
    _vllm_turing_encoder_options.clear()
    _vllm_turing_encoder_options.update(decision[2])
    if decision[1]:
        _vllm_turing_guard(globals(), (_VLLM_TURING_ENCODER_KERNEL,))
    return decision[0]
# <<< vllm-turing clamp
