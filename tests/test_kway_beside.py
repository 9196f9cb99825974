"""The K-way design's certificate facts run beside the search (commands/kway.py:
facts_beside): the same results, bad input still named as such, and the background job
leaves the process's count of BLAS threads to the search."""
from __future__ import annotations

import numpy as np
import pytest

from bhtcli import api
from bhtcli.commands.kway import facts_beside, pair_facts
from bhtcli.errors import InputError
from bhtcli.models import threads


def _models(seed=0, K=3, n=30, d=5):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, d)) for _ in range(K)]


def test_the_facts_beside_are_the_facts():
    mats = _models()
    names = ["M1", "M2", "M3"]
    with facts_beside(mats, names, 1.5) as (job, _):
        got = job.result()
    assert got == pair_facts(mats, names, 1.5)


def test_same_models_stop_the_search_at_its_next_message():
    A, B, C = _models()
    seen = []
    with pytest.raises(InputError, match=r"models 2 \(M2\) and 3 \(M3\)"):
        with facts_beside([A, B, B.copy()], ["M1", "M2", "M3"], 1.0, seen.append) as (job, watched):
            job.exception()                 # the facts are done (and failed)
            watched("a stage of the search")
            seen.append("after the stage")  # never reached
    assert seen == []


def test_a_search_that_fails_on_bad_input_reports_the_input():
    A, B, _ = _models()
    with pytest.raises(InputError, match="same softmax model"):
        with facts_beside([A, B, B + 2.0], ["M1", "M2", "M3"], 1.0):
            raise FloatingPointError("what identical models did to the search")


def test_a_search_error_on_good_input_is_its_own():
    with pytest.raises(ZeroDivisionError):
        with facts_beside(_models(), ["M1", "M2", "M3"], 1.0):
            raise ZeroDivisionError("the search's own defect")


def test_progress_messages_pass_through_with_their_tick():
    seen = []

    def progress(message):
        seen.append(message)
    progress.tick = lambda *a: None
    with facts_beside(_models(), ["M1", "M2", "M3"], 1.0, progress) as (job, watched):
        job.result()
        watched("stage one")
    assert seen == ["stage one"] and watched.tick is progress.tick


def test_the_background_job_leaves_the_blas_thread_count_alone():
    controls = threads._controls()
    if controls is None:
        pytest.skip("no BLAS that threadpoolctl controls")
    get, _, default = controls

    def job():
        with threads.all_threads():
            inside = get()
        with threads.single_threaded():
            pass
        return inside
    with threads.single_threaded():
        with threads.beside(job) as future:
            inside = future.result()
        assert get() == 1               # the search's setting survives the job's blocks
    assert inside == 1 and get() == default


def test_design_and_bad_input_through_the_api():
    A, B, C = _models(seed=4)
    r = api.design([A, B, C], energy=1.0, starts=4)
    c = r.certificate
    assert all(b >= p["bhattacharyya_distance"] for b, p in zip(c["pair_bounds"], r.pairs))
    with pytest.raises(InputError, match="models 1 .* and 3"):
        api.design([A, B, A + 1.0], energy=1.0, starts=4)


def test_passes_take_one_blas_thread_throughout_a_block_with_a_job_beside():
    """One thread while the job runs (it holds a core) and after it ended, until the block
    ends: a count that changed when the job ended would make OpenBLAS's sums, and so the
    search's last bits, depend on the job's timing."""
    import threading
    controls = threads._controls()
    if controls is None or controls[2] < 2:
        pytest.skip("needs a BLAS that threadpoolctl controls, with more than one thread")
    get, _, default = controls
    release = threading.Event()
    with threads.beside(release.wait, 60) as job:
        try:
            with threads.all_threads():
                during = get()
        finally:
            release.set()
        job.result()
        with threads.all_threads():
            ended = get()
    with threads.all_threads():
        after = get()
    assert during == 1 and ended == 1 and after == default


def test_warnings_of_a_search_on_bad_input_are_not_shown():
    import warnings
    A, B, _ = _models()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(InputError):
            with facts_beside([A, B, B.copy()], ["M1", "M2", "M3"], 1.0):
                warnings.warn("overflow in what identical models did", RuntimeWarning)
                raise FloatingPointError("and then failed")
    assert not [w for w in seen if "overflow" in str(w.message)]
    with pytest.warns(RuntimeWarning, match="kept"):
        with facts_beside(_models(), ["M1", "M2", "M3"], 1.0) as (job, _):
            warnings.warn("kept when the input is good", RuntimeWarning)
            job.result()
