"""Vidur profiles in place of the roofline: parsing, interpolation and which rows they replace.

The fixtures under data/ follow Vidur's column layout (mlp.csv as in
data/profiling/compute/a100/meta-llama/Llama-2-70b-hf/mlp.csv, attention.csv as in
data/profiling/a100/attention.csv, all_reduce.csv as in data/profiling/network/a100_dgx/all_reduce.csv)
with hand-picked medians in ms; each test derives its expected values by hand from them."""

import dataclasses
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.network import Network
from simulators.serving._cost import replica_cost
from simulators.serving._profile import apply_profile
from simulators.serving._profile_files import VidurProfile, load_vidur_profile

DATA = Path(__file__).parent / "data"
MLP, ATTENTION, ALL_REDUCE = DATA / "mlp.csv", DATA / "attention.csv", DATA / "all_reduce.csv"
LLAMA70B = get_model("llama2-70b")


@cache
def cost70b(tp=4):
    gpu = get_gpu("A100-80GB")
    return replica_cost(LLAMA70B, gpu, tp, 1, Network.from_gpu(gpu), max_batch_tokens=2048)


@cache
def profile(mlp=True, attention=True, all_reduce=True):
    pick = {MLP: mlp, ATTENTION: attention, ALL_REDUCE: all_reduce}
    return load_vidur_profile(*(path if wanted else None for path, wanted in pick.items()))


def test_milliseconds_become_seconds_and_only_medians_are_read():
    p = profile()
    assert p.mlp.op_s["mlp_up_proj"][0] == pytest.approx(0.3e-3)  # median 0.3 ms; mean is 0.315
    assert p.all_reduce.time_s[0] == pytest.approx(0.02e-3)
    assert p.attention.prefill_s[0] == pytest.approx(0.05e-3)
    assert np.isnan(p.attention.decode_s[0])  # a prefill row: its decode cells are empty


def test_linear_rows_interpolate_the_summed_layer_operations():
    """tp=4 rows: 0.66 ms at T=1, 1.00 ms at 64, 2.0 and 2.2 ms at 128 (mean 2.1); emb (0.5 ms) is
    not a per-layer operation."""
    row = apply_profile(cost70b(), profile(True, False, False), LLAMA70B, 4).linear_s * 1e3
    assert row[[0, 1, 64, 128]] == pytest.approx([0.66, 0.66, 1.0, 2.1])  # index 0 takes T=1's
    assert row[32] == pytest.approx(0.66 + 0.34 * 31 / 63)  # between measured points: linear
    assert row[96] == pytest.approx(1.0 + 1.1 * 32 / 64)
    assert row[256] == pytest.approx(2.1 * 2) and row[2048] == pytest.approx(2.1 * 16)  # beyond: x / x_max


def test_rows_are_filtered_by_tensor_parallel_degree_and_model_shape():
    tp2 = dataclasses.replace(cost70b(), tp=2)  # only tp is read from the cost for filtering
    row = apply_profile(tp2, profile(True, False, False), LLAMA70B, 2).linear_s * 1e3
    assert row[[1, 128]] == pytest.approx([1.32, 3.40])
    llama7b = apply_profile(cost70b(), profile(True, False, False), get_model("llama2-7b"), 4).linear_s
    assert llama7b[:65] * 1e3 == pytest.approx(np.full(65, 0.66))  # its one row (T=64) holds below and ...
    assert llama7b[-1] * 1e3 == pytest.approx(0.66 * 2048 / 64)  # ... scales past it


def test_no_matching_rows_names_what_the_file_has():
    with pytest.raises(SpecError) as err:
        apply_profile(dataclasses.replace(cost70b(), tp=8), profile(True, False, False), LLAMA70B, 8)
    msg = str(err.value)
    assert "mlp.csv" in msg and "num_tensor_parallel_workers=8" in msg and "\n" not in msg
    assert "num_tensor_parallel_workers=4 n_embd=8192" in msg and "num_tensor_parallel_workers=2" in msg
    with pytest.raises(SpecError, match="num_workers=4 devices_per_node=4"):
        apply_profile(dataclasses.replace(cost70b(), tp=8), profile(False, False, True), LLAMA70B, 8)
    with pytest.raises(SpecError, match="differs from the cost's tp=4"):
        apply_profile(cost70b(), profile(), LLAMA70B, 2)


def test_prefill_attention_interpolates_chunk_sizes_and_extrapolates_quadratically():
    """kv_cache_size 0, batch 1, block 16: 0.05 ms at c=64, 0.12 and 0.14 at 128 (mean 0.13),
    0.40 at 256; the chunk with a cache and the block-32 row are not used."""
    row = apply_profile(cost70b(), profile(False, True, False), LLAMA70B, 4).prefill_attention_s * 1e3
    assert row[[0, 1, 63, 64, 128, 256]] == pytest.approx([0.05, 0.05, 0.05, 0.05, 0.13, 0.40])
    assert row[96] == pytest.approx(0.09) and row[192] == pytest.approx(0.265)
    assert row[512] == pytest.approx(0.40 * 4)  # (c / c_max)^2


def test_decode_line_is_recovered_from_linear_data():
    """Decode medians are 0.01 ms + 2e-6 ms per batch_size x kv_cache_size token."""
    cost = apply_profile(cost70b(), profile(False, True, False), LLAMA70B, 4)
    assert cost.decode_attention_fixed_s == pytest.approx(1e-5, rel=1e-9)
    assert cost.decode_attention_per_token_s == pytest.approx(2e-9, rel=1e-9)
    tp2 = apply_profile(dataclasses.replace(cost70b(), tp=2), profile(False, True, False), LLAMA70B, 2)
    assert tp2.decode_attention_fixed_s == pytest.approx(0.02e-3)  # two points: (0, 0.02), (4096, 0.03) ms
    assert tp2.decode_attention_per_token_s == pytest.approx(0.01e-3 / 4096)


def test_all_reduce_interpolates_log_log_in_bytes():
    """hidden 8192 x 2 bytes = 16 KiB per token; num_workers=4 on one node: 0.02 ms at 16 KiB,
    0.04 at 64 KiB, 0.16 at 1 MiB; two all-reduces per layer."""
    row = apply_profile(cost70b(), profile(False, False, True), LLAMA70B, 4).allreduce_s * 1e3
    assert row[[0, 1, 4, 64]] == pytest.approx([0.04, 0.04, 0.08, 0.32])
    assert row[2] == pytest.approx(2 * 0.02 * 2**0.5)  # halfway in log size: sqrt of the time ratio
    assert row[16] == pytest.approx(2 * 0.04 * 4**0.5)
    assert row[128] == pytest.approx(0.64)  # beyond 1 MiB: proportional to bytes


def test_only_the_profiled_rows_change():
    base = cost70b()
    only_mlp = apply_profile(base, profile(True, False, False), LLAMA70B, 4)
    assert not np.array_equal(only_mlp.linear_s, base.linear_s)
    for f in dataclasses.fields(base):
        if f.name != "linear_s":
            assert np.array_equal(getattr(only_mlp, f.name), getattr(base, f.name)), f.name
    every = apply_profile(base, profile(), LLAMA70B, 4)
    replaced = {"linear_s", "allreduce_s", "prefill_attention_s", "decode_attention_fixed_s"}
    replaced |= {"decode_attention_per_token_s"}
    for f in dataclasses.fields(base):
        same = np.array_equal(getattr(every, f.name), getattr(base, f.name))
        assert same != (f.name in replaced), f.name
    assert every.linear_s.dtype == np.float64 and every.linear_s.shape == base.linear_s.shape
    untouched = apply_profile(base, VidurProfile(), LLAMA70B, 4)
    assert all(getattr(untouched, f.name) is getattr(base, f.name) for f in dataclasses.fields(base))


def test_all_reduce_profile_is_unused_without_tensor_parallelism():
    gpu = get_gpu("A100-80GB")
    tp1 = replica_cost(get_model("llama2-7b"), gpu, 1, 1, Network.from_gpu(gpu), max_batch_tokens=64)
    untouched = apply_profile(tp1, profile(False, False, True), get_model("llama2-7b"), 1)
    assert untouched.allreduce_s is tp1.allreduce_s and not untouched.allreduce_s.any()


def write(tmp_path, text):
    path = tmp_path / "broken.csv"
    path.write_text(text)
    return path


def test_malformed_files_give_one_line_errors(tmp_path):
    lines = MLP.read_text().splitlines()
    bad = write(tmp_path, "\n".join([lines[0], lines[1], lines[2].replace(",64,8,8192", ",sixty-four,8,8192")]))
    with pytest.raises(SpecError) as err:
        load_vidur_profile(mlp_csv=bad)
    msg = str(err.value)
    assert "broken.csv: line 3, column n_head: 'sixty-four'" in msg and "expected columns: num_tokens" in msg
    assert "\n" not in msg
    missing = write(tmp_path, lines[0].replace("time_stats.mlp_up_proj.median", "up") + "\n" + lines[1])
    with pytest.raises(SpecError, match=r"missing column\(s\) time_stats.mlp_up_proj.median; expected columns"):
        load_vidur_profile(mlp_csv=missing)
    short = write(tmp_path, lines[0] + "\n" + lines[1] + "\n" + lines[2].rsplit(",", 1)[0])
    with pytest.raises(SpecError, match="line 3 has 57 fields, the header 58"):
        load_vidur_profile(mlp_csv=short)
    with pytest.raises(SpecError, match="time_stats.attn_prefill.median and/or time_stats.attn_decode.median"):
        load_vidur_profile(attention_csv=write(tmp_path, "batch_size,prefill_chunk_size\n1,2\n"))
    with pytest.raises(SpecError, match="column time_stats.all_reduce.median: 0 is not allowed"):
        text = ALL_REDUCE.read_text().replace("0,0.018,0.022,0.021,0.02,", "0,0,0,0,0,", 1)
        load_vidur_profile(all_reduce_csv=write(tmp_path, text))
    with pytest.raises(SpecError, match="cannot read the profile"):
        load_vidur_profile(mlp_csv=tmp_path / "absent.csv")
