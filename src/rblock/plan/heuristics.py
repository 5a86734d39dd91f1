"""Every threshold the planner and tuner use, in one place. Defaults follow PyTorch Inductor (cited per field)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from rblock.errors import InvalidArgument, describe


@dataclass(frozen=True, slots=True)
class Heuristics:
    persistent_rnumel_inner: int = 1024
    """Largest row kept whole in registers when r is contiguous (Inductor: persistent_reduction limit, INNER)."""

    persistent_rnumel_other: int = 64
    """Largest row kept whole in registers otherwise (Inductor: the non-INNER persistent limit)."""

    max_persistent_elems: int = 4096
    """Largest XBLOCK*RBLOCK tile of a persistent kernel (Inductor: persistent reductions' XBLOCK*RBLOCK cap)."""

    max_r0_block: int = 2048
    """Largest RBLOCK of a looped kernel (Inductor: TRITON_MAX_RSPLIT / MAX_R0_BLOCK)."""

    long_row_max_r0_block: int = 8192
    """Rows longer than seed_max_rnumel, and rows a plain loop reads once, also get looped chunks of 4096 and 8192
    (up to this). On the H200, torch.compile max-autotune reached 77% of copy at rms_norm (1024, 65536) against 60%
    for rblock's chunks of 2048; on an H100 its sums at 8192-32768 took 4096 x 16-32 warps, and rblock's with
    them ran 0.99-1.00x its time (benchmarks/NOTES.md, twenty-seventh day)."""

    max_r0_block_register_intensive: int = 1024
    """MAX_R0_BLOCK when the kernel is register intensive (Inductor: halved for many loads+reductions)."""

    register_intensive_xnumel: int = 1024
    """Register intensive needs at least this many rows (Inductor's rule)."""

    register_intensive_loads_and_reductions: int = 10
    """... and at least this many loads plus reductions (Inductor's rule)."""

    inner_coalesce_ratio: float = 8.0
    """r_coalesce_ratio at or above which r is the contiguous dim: hint INNER (Inductor PR 161055)."""

    outer_tiny_rnumel: int = 16
    """An OUTER kernel with at most this many row elements is OUTER_TINY (a small second stage)."""

    seed_min_saved_bytes_ratio: float = 1.3
    """persistent_rblock candidate: looped/persistent bytes must be at least this (PR 161055)."""

    seed_min_r_coalesce_ratio: float = 8.0
    """persistent_rblock candidate: r must be the coalesced dim by this ratio (PR 161055)."""

    seed_min_rnumel_exclusive: int = 2048
    """persistent_rblock candidate: rnumel must exceed this (PR 161055: 2048 < rnumel)."""

    seed_max_rnumel: int = 32768
    """persistent_rblock candidate: rnumel at most this (PR 161055: registers of one program)."""

    seed_max_mem_ops_per_thread: int = 10
    """persistent_rblock candidate: at most this many distinct load/store indices (PR 161055)."""

    seed_max_loads_and_reductions: int = 8
    """persistent_rblock candidate: at most this many loads plus reductions (PR 161055)."""

    seed_tile_elems: int = 4096
    """persistent_rblock candidate: XBLOCK = max(seed_tile_elems // RBLOCK, 1) (PR 161055)."""

    short_row_tall_xblock: int = 8
    """Rows the seed rule would take but for their length (persistent_rnumel_inner < rnumel <=
    seed_min_rnumel_exclusive, no online reduction) get single passes and a loop of this many rows per program, its
    chunk the whole row, at short_row_tall_warps: torch.compile max-autotune's pick at rms_norm (32768, 2048), 92.1-92.5
    us on an H100 against 93.3-94.2 for rblock's loops and single passes in three runs (benchmarks/NOTES.md,
    twenty-ninth day)."""

    short_row_tall_warps: int = 4
    """Warps of that loop: 128 elements a thread per chunk, many loads in flight."""

    online_single_pass_max_rnumel: int = 32768
    """Rows up to this length also get single-pass candidates when the kernel has an online reduction (softmax
    statistics, mean-variance), whose looped form costs an exp or three more instructions per element, even where
    the seed rule sees no bytes to save (cross_entropy, var). The same register bound as the seed's."""

    exact_tiles_min_padding: float = 1.2
    """A row of k * 2^j elements (k = 3, 5 or 7) that its power-of-two tile pads by at least this factor also gets
    single-pass candidates made of k exact tiles of 2^j (5120 = 5 * 1024, 24576 = 3 * 8192): no idle lanes, fewer
    registers. Not yet calibrated: the tuner measures them."""

    exact_tile_elems_per_thread: int = 8
    """Exact tiles get warps for this many elements per thread and tile (16-byte loads of bf16). Measured on the
    H200 with the padded row's warp count instead (benchmarks/results/trials_run3.json): 2 elements per thread and
    tile at 5120 lost to the padded tile (softmax 82.9 against 71.8 us). This rule is not yet measured."""

    elems_per_warp: int = 256
    """Looped tiles: num_warps ~ tile elements / this, clamped to [min_warps, max_warps] (Inductor: RBLOCK/128
    for INNER with 2-byte types; 256 keeps 8 fp32 values per thread per chunk)."""

    elems_per_warp_single_pass: int = 512
    """Single-pass tiles (persistent, persistent_rblock): 16 row elements per thread. Calibrated on the H200
    (benchmarks/results/sweep_configs.json): at N = 4096 softmax ran at 91.7% of copy with 8 warps and 74.2% with
    16; rms_norm 92.0% with 8 warps."""

    min_warps: int = 2
    """Fewest warps per program (Inductor's floor)."""

    few_rows_elems_per_warp: int = 128
    """Fewer rows than SMs, a row per program in one tile: num_warps ~ RBLOCK / this (4 elements per thread), as
    many threads as a program has, since the program's one round of loads is all the latency it waits on. On the
    H200 (trials_run11.json) it did not shorten cross_entropy's mean over 16384 per-row losses (5.9 against 5.8 us
    looped; such a kernel costs about 4.4 us in any form); the tuner picks it for single rows of rms_norm
    (s8_small_batch.json: (1, 8192) at 32 warps, 4.8 us in a CUDA graph)."""

    max_warps: int = 32
    """Most warps per program (the hardware's 1024 threads)."""

    max_spill_bytes: int = 64
    """Tuner: drop candidates that spill more than this many bytes per thread (they run slowly, and ptxas may take
    minutes over them); a few spilled words may cost less than what the form gains, so those are timed. On the H200
    (trials_run22_ln.json, spills from benchmarks/sass.py): layer_norm (2048, 32768)'s prefetching twin at 16 warps
    spills 24 bytes and ran 83.6 us, the best that spills nothing 92.5 us; at 32 warps it spills 64 bytes and ran
    110.1 us. Which of them spills, and by how much, moves with any change to the kernel (40 bytes for the 16-warp
    twin once its mean-variance took one exchange fewer, trials_run26)."""

    compile_wait_s: float = 10.0
    """Tuner: after this many seconds of compiling the candidates, stop waiting for the rest once one has compiled.
    ptxas took 172 and 277 s over layer_norm's split-row kernels at (512, 131072), which spill 232 and 336 bytes
    and would be dropped anyway (`benchmarks/sass.py`, sm_90); every other candidate compiled in under 2 s."""

    min_blocks_per_sm: int = 2
    """Tuner: below this many resident programs per SM (from registers), offer RBLOCK/2 (Inductor's
    _dynamic_scale_rblock); never for persistent_rblock."""

    looped_bytes_in_flight_per_sm: int = 32768
    """Looped: bytes one loop trip of all resident programs of an SM loads, below which a candidate gets a twin with
    its chunk loop unrolled until it reaches this (Little's law: ~30 GB/s per SM times ~1 us of memory latency).
    Few programs (few rows, huge rows, column sums of few column blocks) or small chunks leave each SM waiting on a
    few loads: sum over dim 0 of (5461, 12288) has 1.5 programs per SM, each with one 4-byte load per thread in
    flight per trip (SASS for sm_90), and ran at 19% of read (trials_run4.json); softmax of (256, 262144) has 2
    programs per SM with one 16-byte load per thread each. Triton unrolls none of these loops itself (LLVM did
    unroll the 512 trips of (4096, 16384): 29 loads in flight, 4x faster per trip). Not yet calibrated: the tuner
    measures both forms."""

    max_threads_per_sm: int = 2048
    """Resident threads per SM (Hopper, Ampere): the cap on programs per SM in the estimate above."""

    looped_max_unroll: int = 8
    """Most chunks of a looped kernel in flight at once (registers for their loads)."""

    split_below_sm_fraction: float = 1.0
    """Split a reduction over row slices when its programs would occupy fewer than this fraction of the SMs
    (few rows, or a column sum with few column blocks). Not yet calibrated: the tuner measures it."""

    split_programs_per_sm: int = 4
    """A split aims at this many programs per SM."""

    split_outer_programs_per_sm: float = 4.0
    """Column reductions (r not contiguous) are also split when a column tile's programs would be fewer than this
    many per SM, each tile in the two powers of two around this many programs per SM. Sum over dim 0 on the H200
    (trials, `benchmarks/results/trials_run7.json`): (13107, 5120) split 4 ways into 640 programs took 50 us against
    122 us for its 160 programs unsplit; (5461, 12288), unsplit at 192 programs (1.5 per SM), took 61 us where (2730,
    24576) with 384 took 43. On an H100 (`benchmarks/results/runs_2026-12-13/d0_tiles/`), every tile of 32 to 64
    columns split 1 to 16 ways, forced: the fastest form at 3000 to 12288 columns had 3.9 to 5.8 programs per SM,
    above the aim at 5120 and 6144 (80 and 96 tiles of 64 columns, split 8 ways: 4-6% faster than 4 ways), below
    it at 4096 (64 tiles, split 8 ways: 2% faster than 16)."""

    split_min_chunk: int = 1024
    """Each slice of a split row keeps at least this many elements."""

    split_row_min_rnumel: int = 32768
    """Rows longer than this also get split_row candidates: the row spread over co-resident programs that exchange
    partial results, read once. Up to it one program holds a row (persistent_rblock)."""

    split_row_min_slice: int = 8192
    split_row_max_slice: int = 16384
    """Slices one split_row program holds: each power of two from the max down to the min. Measured under the
    words exchange on an H100 (forced forms, bf16; benchmarks/results/runs_2026-12-10/split_forms2.json and
    before_new_slices.txt): at each of 11 points from (1024, 65536) to (256, 262144), over rms_norm, softmax,
    log_softmax, layer_norm and fused_add_rms_norm, a slice of 16384 or 8192 ran 3-17% faster than the best with
    32768 (rms_norm (512, 131072) 98.7 against 107.5 us, softmax 107.4 against 125.2, layer_norm 113.0 against
    127.6): smaller programs, several per SM, wait on the exchange in turn. Under the counter exchange on the H200
    (trials_run5.json) the smaller slices had lost."""

    split_row_elems_per_warp: int = 2048
    """A split_row program has num_warps ~ slice / this (64 elements per thread), its prefetching twin half as many
    (128 per thread, two slices held; more where its inputs would not fit: split_row_prefetch_max_bytes). Measured
    (same files): 16384 at 8 warps and 8192 at 4 took 2-38% less time than at 16 and 8 warps; prefetching, 16384 at 4
    warps was the fastest form at 4 of the 8 points it was timed at, at 8 warps at 1 of 11 (fused_add_rms_norm,
    whose prefetching form at 4 warps spills 2480 bytes)."""

    split_row_prefetch_max_bytes: int = 768
    """A split_row prefetching twin takes more warps than half the plain form's where at half its inputs' values
    (Features.prefetch_bytes: two rows of each row input, one of each weight) would exceed this many bytes per
    thread (192 registers, besides the exchange and addresses). Offline (sass.py, sm_90, (1024, 65536) and (512,
    131072)), at half the warps (128 elements per thread): bf16 softmax (512 bytes) and rms_norm (768) take
    248-255 registers and spill nothing; bf16 layer_norm (1024) spills 80 bytes, fused_add_rms_norm (1280) 2424;
    fp32 softmax (1024) 216 and rms_norm (1536) 160. At the plain form's warps none spills: bf16 layer_norm 185
    registers, fused_add_rms_norm 200, fp32 rms_norm 196, softmax 221, layer_norm 254. Measured forced
    (runs_2026-12-10/split_forms2.json, an H100): fused_add_rms_norm (512, 131072) 16384 x 8 prefetching 193.1 us,
    the fastest of its forms (plain 255.0, 8192 x 4 200.0, 16384 x 4 prefetching 2832.6); through the tuner
    (runs_2026-12-12) 187.5-189.6 us at 65536-262144 (95-96% of copy; 262144 was looped at 234.5). layer_norm's
    twins, now timed, lost to its plain form by 2-6% at 65536 and 131072 and won by 2% at 262144."""

    split_row_max_parts: int = 16
    """A row spans at most this many split_row programs. With 32 (slices of 8192 at 262144) the H100's `rblock bench`
    (benchmarks/results/runs_2026-12-10/s20_huge_new.json) timed softmax at 178.7 us in the form its own tuner had
    timed fastest, where log_softmax in the same form took 100.8: a row waits for the last of its programs. A bound
    against that spread (one observation), not a calibration."""

    split_row_max_parts_per_sm: float = 0.5
    """A split row spans at most this many programs per SM, so that several row groups run at once."""

    prefetch_min_tile: int = 16384
    """Single-pass tiles of at least this many elements (one or two programs per SM) also get a twin whose programs
    loop over rows and load their next row before reducing this one. Measured without it (trials_run1-3.json):
    softmax (2048, 32768) 91.7 us, 5.9 us per row and SM where moving the row's bytes takes 4.2; (2730, 24576)
    101 us, 4.9 against 3.1: about 1.8 us per row in which the SM's one program waits on a load or a reduction and
    memory idles. With it (trials_run7.json): softmax (2730, 24576) 74.8 us, (2048, 32768) 76.8; at (4096, 16384)
    the twin lost (77.8 against 73.6 us), so the tuner keeps measuring both. Rows that gather get the twin at any
    tile size (trials_run9.json: cross_entropy (16384, 4096) 49.5 against 52.8 us, (65536, 1024) 49.8 against
    52.4). The twin comes at each warp count of its single pass (trials_run22_ln.json): layer_norm (2048, 32768)
    at 32 warps spills and took 110.1 us, at 16 warps 83.6 us against 92.5 for the best single pass without it."""

    combine_tile_elems: int = 4096
    """A split reduction's combine kernel holds at most this many partials in one program's tile (rows times the
    row's partials), as a persistent kernel's tile (max_persistent_elems)."""

    combine_num_warps: int = 4
    """Warps of a split reduction's combine kernel: a small tile of partials, read once."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v, default = getattr(self, f.name), f.default
            if type(v) is bool or not isinstance(v, (int, float)) or (type(default) is int and type(v) is not int):
                raise InvalidArgument("Heuristics", f.name, f"must be {type(default).__name__}, got {describe(v)}")
            if v < 0:
                raise InvalidArgument("Heuristics", f.name, f"must be >= 0, got {describe(v)}")


DEFAULT = Heuristics()
