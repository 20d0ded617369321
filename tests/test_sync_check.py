"""The sync check's judgement of a warm process's evidence."""

from ttfr.analyse import sync_check


def test_sync_check_flags_a_trailing_sync_and_flat_doubling():
    slow_trailing = sync_check.judge({"trailing_sync_fraction": [0.2, 0.3, 0.25], "doubling_ratios": [2.0]}, True)
    assert slow_trailing["unsynchronised"]
    flat = sync_check.judge({"trailing_sync_fraction": [], "doubling_ratios": [1.05, 1.1, 1.0]}, False)
    assert flat["unsynchronised"] and "1.05x" in flat["problems"][0]
    fine = sync_check.judge({"trailing_sync_fraction": [0.001], "doubling_ratios": [1.98, 2.02, 2.1]}, True)
    assert not fine["unsynchronised"]
