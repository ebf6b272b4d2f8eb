"""Smoke runs of bench.py at CPU sizes: every figure's command works and prints its table."""
import bench


def test_step_and_model_benchmarks_run_on_cpu(capsys):
    bench.main(["step", "--preset", "demo", "--batch", "4", "--steps", "1", "--bank", "300"])
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.strip().startswith("fp32")][0].split()
    model_rate, step_rate, ratio = map(float, row[1:4])
    assert model_rate > 0 and step_rate > 0
    assert abs(ratio - step_rate / model_rate) < 0.02 * ratio + 0.01  # timings vary; the columns must agree
