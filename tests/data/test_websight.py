"""WebSight rows -> frontend tasks: the picture-URL rewrite, row conversion, range checks."""

import json

import pytest

from sweet_rl.data.websight import (
    check_columns, check_ranges, convert_row, loader_for, rewrite_image_urls,
    rewrite_image_urls_counted, row_to_task)
from sweet_rl.records import RecordError
from tests.conftest import colbench_file

FIXED = "https://picsum.photos/id/48"


@pytest.mark.parametrize("before, after", [
    # unsplash: path keywords and query strings are part of the URL and go with it
    ('<img src="https://source.unsplash.com/random/800x600/?nature">',
     f'<img src="{FIXED}/800/600">'),
    ("<img src='https://source.unsplash.com/random/300x200/?real-estate,house'>",
     f"<img src='{FIXED}/300/200'>"),
    ('<img src="https://source.unsplash.com/random/1600x900/city/night">',
     f'<img src="{FIXED}/1600/900">'),
    ('<img src="http://source.unsplash.com/random/40x50">', f'<img src="{FIXED}/40/50">'),
    ('<div style="background-image: url(//source.unsplash.com/random/1200x400/?food)">',
     f'<div style="background-image: url({FIXED}/1200/400)">'),
    # picsum W/H, with or without a query string; picsum's square form W
    ('<img src="https://picsum.photos/200/300">', f'<img src="{FIXED}/200/300">'),
    ('<img src="https://picsum.photos/200/300?random=1">', f'<img src="{FIXED}/200/300">'),
    ('<img src="https://i.picsum.photos/640/480.jpg?grayscale">', f'<img src="{FIXED}/640/480">'),
    ('<img src="https://picsum.photos/250">', f'<img src="{FIXED}/250/250">'),
])
def test_random_picture_urls_become_the_fixed_picture(before, after):
    assert rewrite_image_urls(before) == after


@pytest.mark.parametrize("html", [
    '<img src="https://picsum.photos/id/48/640/480">',  # already the fixed picture
    '<img src="https://picsum.photos/id/48/300/200-estate">',  # as in the published tasks
    '<img src="https://picsum.photos/id/12/640/480">',  # another specific picture
    '<img src="https://picsum.photos/seed/cat/200/300">',
    '<img src="https://images.unsplash.com/photo-1500?w=800&h=600">',
    '<img src="https://source.unsplash.com/random/800x600abc">',  # not a size segment
    '<img src="https://example.com/random/800x600/">',
    '<img src="https://via.placeholder.com/150">',
    "<p>see picsum.photos/200/300 for details</p>",  # no scheme: prose, not a URL
])
def test_other_urls_are_untouched(html):
    assert rewrite_image_urls_counted(html) == (html, 0)


def test_several_urls_are_counted():
    html = ('<img src="https://source.unsplash.com/random/10x20/?a">'
            '<img src="https://picsum.photos/30/40"><img src="https://picsum.photos/id/48/5/6">')
    out, count = rewrite_image_urls_counted(html)
    assert count == 2
    assert out.count(FIXED) == 3 and "unsplash" not in out


def test_published_tasks_are_already_rewritten():
    """The real ColBench frontend tasks were made by this rewrite: applying it changes nothing."""
    with open(colbench_file("frontend_test.jsonl"), encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle][:200]
    assert all(rewrite_image_urls(t["ground_truth"]) == t["ground_truth"] for t in tasks)
    assert sum(f"{FIXED}/" in t["ground_truth"] for t in tasks) > 100


def test_row_to_task():
    row = {"image": object(), "llm_generated_idea": "A bakery site: hero image, menu.",
           "text": '<html><img src="https://source.unsplash.com/random/640x480/?bread"></html>'}
    assert row_to_task(row) == {"problem_description": "A bakery site: hero image, menu.",
                                "ground_truth": f'<html><img src="{FIXED}/640/480"></html>'}
    assert convert_row(row)[1] == 1


@pytest.mark.parametrize("row, field, message", [
    ({"text": "<html></html>"}, "llm_generated_idea", "missing column in row 7"),
    ({"llm_generated_idea": "idea", "html": "<html></html>"}, "text", "missing column in row 7"),
    ({"llm_generated_idea": None, "text": "<html></html>"}, "llm_generated_idea",
     "expected a string in row 7, got NoneType"),
    ({"llm_generated_idea": "idea", "text": b"<html>"}, "text", "got bytes"),
])
def test_bad_rows_name_the_column(row, field, message):
    with pytest.raises(RecordError) as err:
        row_to_task(row, index=7)
    assert err.value.field == field
    assert message in str(err.value) and f"field '{field}'" in str(err.value)


def test_row_that_is_not_a_mapping():
    with pytest.raises(RecordError, match="got list"):
        row_to_task(["idea", "<html>"])


def test_check_columns():
    check_columns(["image", "text", "llm_generated_idea"], "src")
    check_columns(None, "src")  # unknown schema: rows are checked one by one
    with pytest.raises(RecordError) as err:
        check_columns(["image", "text"], "data/web.parquet")
    assert str(err.value).startswith("data/web.parquet: field 'llm_generated_idea': missing column")


def test_check_ranges():
    check_ranges({"train": (0, 10_000), "test": (10_000, 20_000)})
    check_ranges({"train": (5, 5), "test": (0, 10)})  # an empty range overlaps nothing
    with pytest.raises(ValueError, match="overlap"):
        check_ranges({"train": (0, 10), "test": (9, 20)})
    with pytest.raises(ValueError, match="start 10 is after end 5"):
        check_ranges({"train": (10, 5), "test": (20, 30)})
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="non-negative integers"):
            check_ranges({"train": (bad, 10), "test": (10, 20)})


def test_loader_for():
    assert loader_for("a/train-0001.parquet") == "parquet"
    assert loader_for(["x.JSONL", "y.jsonl"]) == "json"
    assert loader_for("rows.csv") == "csv"
    with pytest.raises(ValueError, match="expected .parquet"):
        loader_for("rows.txt")
