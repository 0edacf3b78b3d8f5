"""QuAFL with quantized exchange (afl.compress) on a tiny seeded federation, against a plain-loop replay.

The replay trains every contacted client with a fresh model copy and ``torch.optim.SGD`` and applies the public
QuAFL code's rules: uploads decoded with the server's ``w_{t-1}`` as key, one broadcast ``Q(w_{t-1})`` decoded
by each client with its own local model as key, server average and client mixing on the decoded values.
"""
import pytest
import torch

from afl.algorithms import run_algorithm
from afl.compress import Identity, LatticeQuantizer, make_quantizer
from afl.errors import ParameterError
from reference import K, LR, N, S, Reference, federation, server_steps

RUN = dict(K=K, lr=LR, total_time=60.0, eval_every=20.0, s=S, server_interval=7.0)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny tensors: torch's intra-op threads only contend on a busy machine (2.3 s -> 0.06 s per run)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def base():
    """The unquantized run (quantizer=None)."""
    out = run_algorithm("quafl", federation(), **RUN)
    assert out["server_steps"] >= 5
    return out


def replay(out, fed, quantizer):
    """The server model QuAFL should end at, given the run's contacts (who, when, how many steps)."""
    ref = Reference(fed)
    send = (lambda x, key: x) if quantizer is None else quantizer.roundtrip
    w = fed.init.clone()
    starts = {c: w.clone() for c in range(N)}
    batches = {c: ref.streams.take(c, K) for c in range(N)}
    for group in server_steps(out["schedule"].contacts):
        local = {c.client: ref.train(starts[c.client], batches[c.client], c.steps, LR * (S + 1) / S)
                 for c in group}
        w_new = (w + sum(send(local[c.client], w) for c in group)) / (S + 1)       # server decodes with w_{t-1}
        for c in group:
            received = send(w, local[c.client])                                     # client decodes with w^i
            starts[c.client] = (received + S * local[c.client]) / (S + 1)
            batches[c.client] = ref.streams.take(c.client, K)
        w = w_new
    return w


@pytest.mark.parametrize("spec", [None, "lattice:8:1e-2", "lattice:4:1e-2"])
def test_quantized_quafl_matches_the_replay(spec, base):
    fed = federation()
    q = None if spec is None else make_quantizer(spec)
    out = base if spec is None else run_algorithm("quafl", fed, quantizer=spec, **RUN)
    torch.testing.assert_close(out["model"], replay(out, fed, q), rtol=1e-4, atol=1e-5)
    if spec is None:
        assert "lattice_overflows" not in out
        return
    assert [(c.time, c.client, c.steps) for c in out["schedule"].contacts] == \
           [(c.time, c.client, c.steps) for c in base["schedule"].contacts]      # same schedule, other models
    assert (out["model"] - base["model"]).abs().max() > 1e-3                    # a coarse quantizer matters
    d, steps = fed.init.numel(), out["server_steps"]
    assert out["bytes_up"] == out["bytes_down"] == steps * S * q.nbytes(d) == steps * S * q.q * d // 8
    assert base["bytes_up"] == out["bytes_up"] * 32 // q.q                      # exactly 32/bits fewer bytes
    assert out["curve"]["bytes_up"][-1] <= out["bytes_up"]
    if spec == "lattice:4:1e-2":                                                # radius 0.075: models wrap around
        assert out["lattice_overflows"] > 0 and out["curve"]["lattice_overflows"][0] == 0
    else:
        assert out["lattice_overflows"] == 0


def test_fine_lattice_and_identity_equal_unquantized(base):
    fine = run_algorithm("quafl", federation(), quantizer=LatticeQuantizer(32, 1e-9), **RUN)
    torch.testing.assert_close(fine["model"], base["model"], rtol=1e-5, atol=1e-6)
    assert fine["lattice_overflows"] == 0
    assert fine["bytes_up"] == base["bytes_up"] == base["server_steps"] * S * federation().model_bytes
    same = run_algorithm("quafl", federation(), quantizer=Identity(), **RUN)
    assert torch.equal(same["model"], base["model"])
    assert same["curve"]["accuracy"] == base["curve"]["accuracy"] and same["bytes_down"] == base["bytes_down"]


def test_qsgd_bytes_include_the_scale_and_runs_are_seeded(base):
    a = run_algorithm("quafl", federation(), quantizer="qsgd:4", **RUN)
    b = run_algorithm("quafl", federation(), quantizer="qsgd:4", **RUN)
    d = federation().init.numel()
    assert a["bytes_up"] == a["bytes_down"] == a["server_steps"] * S * -(-(4 * d + 32) // 8)
    assert torch.equal(a["model"], b["model"])                                  # seeded from the federation
    assert (a["model"] - base["model"]).abs().max() > 1e-3


def test_interval_scaled_by_bits_only_on_request(base):
    out = run_algorithm("quafl", federation(), quantizer="lattice:16:1e-3", scale_interval_by_bits=True, **RUN)
    times = sorted({c.time for c in out["schedule"].contacts})
    assert times == pytest.approx([3.5 * k for k in range(1, len(times) + 1)])   # 7 * 16 / 32
    assert times[-1] > 60.0 - 3.5 and out["server_steps"] == len(times)
    assert sorted({c.time for c in base["schedule"].contacts})[0] == 7.0


def test_quantizer_only_for_quafl_and_bad_specs_name_the_parameter():
    with pytest.raises(ParameterError, match="^quantizer="):
        run_algorithm("favas", federation(), quantizer="lattice:14:1e-4", **RUN)
    with pytest.raises(ParameterError, match="^bits="):
        run_algorithm("quafl", federation(), quantizer="lattice:64:1e-4", **RUN)
    with pytest.raises(ParameterError, match="^quantizer="):
        run_algorithm("quafl", federation(), quantizer="fp8", **RUN)
