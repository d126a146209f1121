from __future__ import annotations

import re

import pytest

from db.slugs import MAX_WORDS, entity_slug, paper_slug, slugify

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Throughput Prediction of Asynchronous SGD in TensorFlow",
            "throughput-prediction-of-asynchronous-sgd-in-tensorflow",
        ),
        ("Wůmo Yán", "wumo-yan"),
        ("Jürgen Müller-Lüdenscheidt", "jurgen-muller-ludenscheidt"),
        ("Ñandú & Çelik — Straße", "nandu-celik-strasse"),
        ("Université de Montréal", "universite-de-montreal"),
        ("Łukasz Żółć", "lukasz-zolc"),
        ("Αθήνα", "athina"),
        ("Москва", "moskva"),
    ],
)
def test_slugify_folds_latin_greek_and_cyrillic_to_ascii(text: str, expected: str) -> None:
    assert slugify(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("北京大学", "bei-jing-da-xue"),
        ("東京大学", "dong-jing-da-xue"),
        ("王小明", "wang-xiao-ming"),
        ("Tsinghua 清华大学 AI", "tsinghua-qing-hua-da-xue-ai"),
    ],
)
def test_slugify_gives_each_cjk_syllable_its_own_word(text: str, expected: str) -> None:
    assert slugify(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "!!! ???", "—", "\u200b"])
def test_slugify_of_nothing_wordlike_is_empty(text: str) -> None:
    assert slugify(text) == ""


def test_slugify_keeps_at_most_max_words() -> None:
    words = [f"w{i}" for i in range(MAX_WORDS + 8)]
    assert slugify(" ".join(words)) == "-".join(words[:MAX_WORDS])
    assert slugify("a b c d", max_words=2) == "a-b"


@pytest.mark.parametrize(
    "text",
    ["C++ & C# (2nd ed.)", "  leading and   trailing  ", "x/y\\z_w", "L'Hôpital's rule", "Ǆemal ǅ ǆ", "ﬁne ﬂow"],
)
def test_slugify_output_is_always_url_safe(text: str) -> None:
    assert SLUG.match(slugify(text))


def test_entity_slug_puts_the_id_first() -> None:
    assert entity_slug(1396945, slugify("Wumo Yan")) == "1396945-wumo-yan"
    assert entity_slug(42, slugify("北京大学")) == "42-bei-jing-da-xue"


def test_entity_slug_without_a_name_is_the_id() -> None:
    assert entity_slug(7, slugify("!!!")) == "7"


def test_paper_slug_new_style_id() -> None:
    assert (
        paper_slug("1911.04650", "Throughput Prediction of Asynchronous SGD in TensorFlow")
        == "1911.04650-throughput-prediction-of-asynchronous-sgd-in-tensorflow"
    )
    assert paper_slug("2401.12345", "Über die Quantenmechanik") == "2401.12345-uber-die-quantenmechanik"


def test_paper_slug_old_style_id_loses_its_slash() -> None:
    slug = paper_slug("astro-ph/9901001", "Dark Matter in Dwarf Galaxies")
    assert slug == "astro-ph-9901001-dark-matter-in-dwarf-galaxies"
    assert "/" not in slug
    assert paper_slug("hep-th/9711200", "") == "hep-th-9711200"


def test_paper_slug_folds_a_cjk_title() -> None:
    assert paper_slug("2101.00001", "深度学习") == "2101.00001-shen-du-xue-xi"
