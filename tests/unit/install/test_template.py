"""The Go-template subset karpy's chart is written in, rendered without helm."""

from __future__ import annotations

import pytest

from karpy.install import template


def render(text: str, values: dict[str, object] | None = None) -> str:
    return template.Renderer({"t.yaml": text}).render("t.yaml", {"Values": values or {}, "Release": {"Name": "r"}})


def test_trim_markers_remove_the_whitespace_on_their_side_only() -> None:
    assert render("a  \n  {{- .Values.x }}  \n b", {"x": 1}) == "a1  \n b"
    assert render("a {{ .Values.x -}} \n\n b", {"x": "v"}) == "a vb"


def test_if_else_if_else_picks_the_first_true_arm() -> None:
    text = '{{ if eq .Values.c "aws" }}A{{ else if eq .Values.c "azure" }}Z{{ else }}K{{ end }}'
    assert [render(text, {"c": c}) for c in ("aws", "azure", "kwok")] == ["A", "Z", "K"]


def test_with_moves_the_dot_and_skips_empty_values() -> None:
    text = "{{ with .Values.m }}{{ .k }}{{ else }}none{{ end }}"
    assert render(text, {"m": {"k": "v"}}) == "v"
    assert render(text, {"m": {}}) == "none"
    assert render(text, {}) == "none"


def test_helm_functions_behave_as_helms() -> None:
    assert render("{{ .Values.n | quote }}", {"n": 8080}) == '"8080"'
    assert render("{{ .Values.b | quote }}", {"b": False}) == '"false"'
    assert render('{{ default "d" .Values.missing }}') == "d"
    assert render('{{ printf "%s-%v" .Release.Name .Values.x | trunc 4 | trimSuffix "-" }}', {"x": True}) == "r-tr"
    assert render("x:{{- toYaml .Values.m | nindent 2 }}", {"m": {"b": 1, "a": [1]}}) == "x:\n  a:\n  - 1\n  b: 1"
    assert render('{{ contains "ar" "karpy" }}') == "true"


def test_define_and_include_share_templates_across_files() -> None:
    r = template.Renderer({"_h.tpl": '{{- define "n" -}}name-{{ .Release.Name }}{{- end }}',
                           "t.yaml": 'x: {{ include "n" . }}'})
    assert r.render("t.yaml", {"Release": {"Name": "rel"}}) == "x: name-rel"


def test_a_field_of_a_missing_map_is_an_error_as_in_helm() -> None:
    assert render("[{{ .Values.a }}]") == "[]"
    with pytest.raises(template.TemplateError, match="nil pointer"):
        render("{{ .Values.a.b }}")


def test_required_fails_with_its_message_on_an_empty_value() -> None:
    with pytest.raises(template.TemplateError, match="clusterName is required"):
        render('{{ required "clusterName is required" .Values.c }}', {"c": ""})


@pytest.mark.parametrize("text", ["{{ range .Values.l }}{{ end }}", "{{ $x := 1 }}", "{{ lookup \"v1\" }}",
                                  "{{ if .Values.x }}", "{{ end }}"])
def test_constructs_outside_the_subset_fail_loudly(text: str) -> None:
    with pytest.raises(template.TemplateError):
        render(text, {"l": [1], "x": True})
