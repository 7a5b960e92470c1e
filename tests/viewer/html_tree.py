"""A small HTML tree for the pages' tests, on the standard library's parser (no third-party HTML library here):
elements with their attributes, children and text, found by tag, class and attributes."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})


@dataclasses.dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = dataclasses.field(default_factory=list)

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get("class") or "").split())

    def get(self, name: str) -> str | None:
        return self.attrs.get(name)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for child in self.children:
            if isinstance(child, Element):
                yield child
                yield from child.iter()

    def find_all(self, tag: str | None = None, *, class_: str | None = None, **attrs: str) -> list[Element]:
        found = []
        for el in self.iter():
            if tag is not None and el.tag != tag:
                continue
            if class_ is not None and class_ not in el.classes:
                continue
            if any(el.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            found.append(el)
        return found

    def find(self, tag: str | None = None, *, class_: str | None = None, **attrs: str) -> Element | None:
        found = self.find_all(tag, class_=class_, **attrs)
        return found[0] if found else None

    def by_id(self, element_id: str) -> Element:
        found = self.find(id=element_id)
        assert found is not None, f"no element #{element_id}"
        return found


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, dict(attrs))
        self.stack[-1].children.append(el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str | bytes) -> Element:
    builder = _Builder()
    builder.feed(html.decode() if isinstance(html, bytes) else html)
    builder.close()
    return builder.root
