"""Finding and replacing the page in an agent's message (pure functions)."""

import pytest

from sweet_rl.environments.html_snippet import PAGE_PLACEHOLDER, find_page, split_page
from sweet_rl.environments.protocol import parse_agent_output


def extract_page(message, lenient=False):
    """The page's HTML exactly as written, or None (as the environment cuts it)."""
    span = find_page(message, lenient)
    return message[span[0]:span[1]] if span else None


def page_from_output(raw_output):
    """A raw generation's turn content and the page shown after ``OUTPUT:``."""
    return split_page(parse_agent_output(raw_output).message)


@pytest.mark.parametrize(
    "message, page",
    [
        # <html> beats <body>, even when the body comes first.
        ("a <body>b</body> c <html><body>d</body></html> e", "<html><body>d</body></html>"),
        # The first page, and the shortest match: the second page stays in the content.
        ("<html>one</html> and <html>two</html>", "<html>one</html>"),
        # Across lines, with attributes on the tag.
        ('see:\n<html lang="en">\n<body>\nhi\n</body>\n</html>\nok',
         '<html lang="en">\n<body>\nhi\n</body>\n</html>'),
        # Without <html>, the first <body> with its attributes.
        (
            "x <body class='p-4'>\n<p>b</p>\n</body> <body>2</body>",
            "<body class='p-4'>\n<p>b</p>\n</body>",
        ),
        # An unclosed <html> is no page; a closed <body> inside it still is.
        ("<html><body>b</body>", "<body>b</body>"),
        ("just words about html and body tags", None),
        ("<html>never closed", None),
    ],
)
def test_both_rules_agree_on_lower_case_pages(message, page):
    assert extract_page(message) == page == extract_page(message, lenient=True)
    assert (find_page(message) is None) == (page is None)


@pytest.mark.parametrize(
    "message, original, lenient",
    [
        # Tag names as written: upper case is no page for the original's rule.
        ("Here: <HTML><BODY>red</BODY></HTML>", None, "<HTML><BODY>red</BODY></HTML>"),
        # A closing tag in another case: the original's rule falls back to the <body>.
        ('<html lang="en"><body>\nhi\n</body>\n</HTML >', "<body>\nhi\n</body>",
         '<html lang="en"><body>\nhi\n</body>\n</HTML >'),
        ("<Body>x</Body>", None, "<Body>x</Body>"),
        # The original's opening tag is "<html" and anything up to the next ">".
        ("<htmlx>a</html>", "<htmlx>a</html>", None),
        ("<html\nlang='en'>a</html>", "<html\nlang='en'>a</html>", "<html\nlang='en'>a</html>"),
        # ... and its closing tag exactly "</html>".
        ("<html>a</html >", None, "<html>a</html >"),
        ("<htmlx>no</htmlx> <bodyguard>no</bodyguard>", None, None),
    ],
)
def test_the_original_rule_reads_tags_as_written(message, original, lenient):
    assert extract_page(message) == original
    assert extract_page(message, lenient=True) == lenient


def test_split_replaces_only_the_page():
    content, page = split_page("Here:\n<html><body>x</body></html>\nBetter? <html>2</html>")
    assert page == "<html><body>x</body></html>"
    assert content == f"Here:\n{PAGE_PLACEHOLDER}\nBetter? <html>2</html>"
    assert split_page("no page here") == ("no page here", None)


def test_only_the_text_after_output_counts():
    raw = (
        "<html>draft while thinking</html> OUTPUT: Shown: <html>final</html> OUTPUT: <html>x</html>"
    )
    # the message between the two OUTPUT: markers, not stripped
    assert page_from_output(raw) == (f" Shown: {PAGE_PLACEHOLDER} ", "<html>final</html>")
    # A page written only while thinking is never shown.
    assert page_from_output("<html>thinking</html> OUTPUT: What colours?") == (
        " What colours?",
        None,
    )
    # Without OUTPUT: the whole message is visible, as written.
    assert page_from_output("  <body>a</body> ") == (f"  {PAGE_PLACEHOLDER} ", "<body>a</body>")
