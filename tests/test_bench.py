"""explorer.bench's report: the searches' CPU time beside their wall time."""

from explorer.bench import Timing, render


def test_render_gives_each_searchs_cpu_time_and_its_first_to_best_ratio():
    search = Timing("search x", 2.0, 1.0, 3, 1000, first_cpu_s=0.5, best_cpu_s=0.2)
    estimate = Timing("estimate y", 0.004, 0.001, 20)
    text = render([search, estimate], "pinned to CPU 0")
    assert f"{'search x':<42} first 500.0ms, best 200.0ms, first/best 2.50" in text
    cpu_lines = text.split("CPU time of this process")[1].splitlines()[1:]
    assert [line.split()[0] for line in cpu_lines] == ["search"]  # no line for a non-search


def test_the_first_run_of_every_case_starts_with_the_cores_caches_empty():
    # a case's first run must not reuse what an earlier case cached (the bench's "cold")
    from explorer.bench import clear_core_caches
    from explorer.presets import _preset_model, load_model
    from explorer.schedules import StageTimes, step_time
    from explorer.schedules.engine import compile_named

    step_time("zb-h1", 8, 64, 1, StageTimes.uniform(8, forward_s=1.0, backward_s=1.0,
                                                    weight_s=1.0))  # fmt: skip
    assert compile_named.cache_info().currsize > 0
    assert clear_core_caches() > 10
    assert compile_named.cache_info().currsize == 0
    load_model("llama-3.1-8b")
    held = _preset_model.cache_info().currsize
    clear_core_caches()
    assert _preset_model.cache_info().currsize == held > 0  # the presets' loaders keep theirs
