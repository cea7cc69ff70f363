"""explorer.bench's report: the searches' CPU time beside their wall time."""

from explorer.bench import Timing, render


def test_render_gives_each_searchs_cpu_time_and_its_first_to_best_ratio():
    search = Timing("search x", 2.0, 1.0, 3, 1000, first_cpu_s=0.5, best_cpu_s=0.2)
    estimate = Timing("estimate y", 0.004, 0.001, 20)
    text = render([search, estimate], "pinned to CPU 0")
    assert f"{'search x':<42} first 500.0ms, best 200.0ms, first/best 2.50" in text
    cpu_lines = text.split("CPU time of this process")[1].splitlines()[1:]
    assert [line.split()[0] for line in cpu_lines] == ["search"]  # no line for a non-search
