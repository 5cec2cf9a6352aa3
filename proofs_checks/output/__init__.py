"""Output: the report writers (Markdown/JSON in :mod:`.report`, the HTML site in :mod:`.html_report`,
MathML in :mod:`.mathml`) and the generated claim catalogue (:mod:`.catalogue`). Every output is
written through one safe writer (:func:`.report.build_output`: temporary sibling, stamp, swap)."""
