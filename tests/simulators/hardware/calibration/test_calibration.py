"""Calibration tables: the CSV loader and how measured times override the analytical model.

The tables here are written by the tests with round, made-up times; dse ships no measurements."""

import numpy as np
import pytest

from simulators import DseError
from simulators.hardware import attention_time_s, elementwise_time_s, gemm_time_s, get_gpu, load_calibration

H100 = get_gpu("H100-SXM")
HEADER = "gpu,op,precision,m,n,k,batch,heads,seq_q,seq_kv,head_dim,causal,phase,nbytes,time_s,source\n"


@pytest.fixture
def table(tmp_path):
    def write(*rows: str):
        path = tmp_path / "calibration.csv"
        path.write_text(HEADER + "".join(r + "\n" for r in rows))
        return load_calibration(path)

    return write


def gemm_row(m, n, k, time_s, gpu="h100", precision="bf16", batch=1):
    return f"{gpu},gemm,{precision},{m},{n},{k},{batch},,,,,,,,{time_s},test table"


def test_exact_shape_returns_the_measured_time(table):
    calibration = table(gemm_row(4096, 4096, 4096, 0.01), gemm_row(8192, 8192, 8192, 0.05))
    assert gemm_time_s(H100, 4096, 4096, 4096, calibration=calibration) == 0.01
    assert gemm_time_s(H100, 8192, 8192, 8192, calibration=calibration) == 0.05


def test_between_two_measurements_the_time_lies_between_them(table):
    # Both measured slower than the model, by different factors.
    t1, t2 = 1.3 * gemm_time_s(H100, 4096, 8192, 8192), 1.1 * gemm_time_s(H100, 16384, 8192, 8192)
    calibration = table(gemm_row(4096, 8192, 8192, t1), gemm_row(16384, 8192, 8192, t2))
    t = gemm_time_s(H100, 8192, 8192, 8192, calibration=calibration)
    assert t1 < t < t2
    # The correction factor lies between the neighbours' and is their geometric mean midway.
    factor = t / gemm_time_s(H100, 8192, 8192, 8192)
    assert factor == pytest.approx(np.sqrt(1.3 * 1.1))


def test_a_table_that_agrees_with_the_model_changes_nothing(table):
    shapes = [(1024, 1024, 1024), (4096, 4096, 1024), (8192, 2048, 16384)]
    calibration = table(*(gemm_row(*s, repr(gemm_time_s(H100, *s))) for s in shapes))
    query = np.array([512, 3000, 7777, 20000])
    assert np.allclose(
        gemm_time_s(H100, query, 4096, 4096, calibration=calibration), gemm_time_s(H100, query, 4096, 4096)
    )


def test_other_gpus_and_precisions_keep_the_analytical_curve(table):
    calibration = table(gemm_row(4096, 4096, 4096, 1.0))
    assert gemm_time_s(H100, 4096, 4096, 4096, precision="fp8", calibration=calibration) == gemm_time_s(
        H100, 4096, 4096, 4096, precision="fp8"
    )
    h200 = get_gpu("H200")
    assert gemm_time_s(h200, 4096, 4096, 4096, calibration=calibration) == gemm_time_s(h200, 4096, 4096, 4096)


def test_arrays_equal_scalar_calls_with_a_table(table):
    calibration = table(gemm_row(4096, 4096, 4096, 0.01), gemm_row(1024, 4096, 4096, 0.002))
    m = np.array([512, 1024, 2048, 4096, 9000])
    times = gemm_time_s(H100, m, 4096, 4096, calibration=calibration)
    assert list(times) == [gemm_time_s(H100, int(x), 4096, 4096, calibration=calibration) for x in m]


def test_attention_and_elementwise_rows(table):
    calibration = table(
        "H100-SXM,attention,bf16,,,,2,16,8192,8192,128,true,bwd,,0.004,test table",
        "H100-SXM,elementwise,,,,,,,,,,,,1000000000,0.0005,test table",
    )
    assert attention_time_s(H100, 2, 16, 8192, 8192, 128, True, phase="bwd", calibration=calibration) == 0.004
    fwd = attention_time_s(H100, 2, 16, 8192, 8192, 128, True, calibration=calibration)
    assert fwd == attention_time_s(H100, 2, 16, 8192, 8192, 128, True)  # only the bwd group is measured
    assert elementwise_time_s(H100, 1e9, calibration=calibration) == 0.0005
    factor = 0.0005 / elementwise_time_s(H100, 1e9)
    assert elementwise_time_s(H100, 4e9, calibration=calibration) == pytest.approx(
        factor * elementwise_time_s(H100, 4e9)
    )


@pytest.mark.parametrize(
    "row,message",
    [
        (gemm_row(4096, 4096, 4096, -1), r"line 2: time_s: '-1' is not allowed; must be a number > 0"),
        (gemm_row(0, 4096, 4096, 1), r"line 2: m: '0' is not allowed"),
        (gemm_row(4096, 4096, 4096, 1, gpu="h1000"), r"line 2: gpu: 'h1000' is not a known GPU"),
        (
            gemm_row(4096, 4096, 4096, 1, precision=""),
            r"precision: '' is not allowed; gemm and attention rows need one of fp16, bf16, fp8, fp4",
        ),
        (gemm_row(4096, 4096, 4096, 1, precision="int8"), r"precision: 'int8' is not allowed"),
        ("H100-SXM,gemm,bf16,1,1", r"line 2: k: '' is not allowed; must be a number > 0"),  # a short row
        ("H100-SXM,conv,bf16,1,1,1,1,,,,,,,,1,x", r"op: 'conv' is not allowed; allowed: gemm, attention, elementwise"),
        (
            "H100-SXM,attention,bf16,,,,1,1,1,1,1,maybe,fwd,,1,x",
            r"causal: 'maybe' is not allowed; allowed: true, false",
        ),
        ("H100-SXM,gemm,bf16,1,1,1,1,,,,,,,,1,", r"source: '' is not allowed; every measurement needs a source"),
    ],
)
def test_bad_rows_name_the_line_column_and_value(table, row, message):
    with pytest.raises(DseError, match=message):
        table(row)


def test_a_shape_measured_twice_is_ambiguous(table):
    with pytest.raises(DseError, match=r"line 3: shape .* already measured on line 2"):
        table(gemm_row(4096, 4096, 4096, 0.01), gemm_row(4096, 4096, 4096, 0.02, gpu="H100-SXM"))


def test_missing_columns_are_named(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("gpu,op,time_s\n")
    with pytest.raises(DseError, match=r"c\.csv: missing columns precision, m, n"):
        load_calibration(path)
