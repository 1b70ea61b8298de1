"""Search: the per-machine SQLite index of the notes and what ranks them.

`index` keeps the FTS5 index in step with memory/ (`scan` walks the tree,
`catalog` holds every query against it); `query` parses what a person types,
`ranking` holds the rankers (keyword BM25, and hybrid with `semantic` vectors
from the local `embed` model, answered by `semantic_server` when one runs),
`engine.search` puts them together. It reads the note format from the base
and knows nothing of the store's writes, sync or agents.

Other packages use only the names below (tests/architecture/test_faces.py).
"""

from typing import TYPE_CHECKING

from anamnesis.base.face import lazy_face

if TYPE_CHECKING:
    from anamnesis.search.catalog import index_error as index_error
    from anamnesis.search.catalog import parse_when as parse_when
    from anamnesis.search.embed import missing_dependencies as missing_dependencies
    from anamnesis.search.engine import default_ranker as default_ranker
    from anamnesis.search.engine import recency as recency
    from anamnesis.search.engine import search as search
    from anamnesis.search.index import MARK_END as MARK_END
    from anamnesis.search.index import MARK_START as MARK_START
    from anamnesis.search.index import Hit as Hit
    from anamnesis.search.index import Index as Index
    from anamnesis.search.index import RefreshReport as RefreshReport
    from anamnesis.search.index import behind_path as behind_path
    from anamnesis.search.index import file_problems as file_problems
    from anamnesis.search.index import last_scan as last_scan
    from anamnesis.search.index import mark_behind as mark_behind
    from anamnesis.search.index import open_index as open_index
    from anamnesis.search.query import SAME_AS as SAME_AS
    from anamnesis.search.query import STOPWORDS as STOPWORDS
    from anamnesis.search.ranking import KeywordRanker as KeywordRanker
    from anamnesis.search.refresh import PeriodicRefresh as PeriodicRefresh
    from anamnesis.search.semantic import SEARCH_SERVE_IDLE as SEARCH_SERVE_IDLE
    from anamnesis.search.semantic import SemanticError as SemanticError
    from anamnesis.search.semantic import catch_up as catch_up
    from anamnesis.search.semantic import disable_semantic as disable_semantic
    from anamnesis.search.semantic import enable_semantic as enable_semantic
    from anamnesis.search.semantic import engine_for as engine_for
    from anamnesis.search.semantic import semantic_status as semantic_status
    from anamnesis.search.semantic import server_answering as server_answering
    from anamnesis.search.semantic import settings_of as settings_of
    from anamnesis.search.semantic import socket_path as socket_path
    from anamnesis.search.semantic import start_background_update as start_background_update
    from anamnesis.search.semantic import start_query_server as start_query_server
    from anamnesis.search.semantic import stop_query_server as stop_query_server
    from anamnesis.search.semantic import unavailable_reason as unavailable_reason
    from anamnesis.search.semantic import update_vectors as update_vectors
    from anamnesis.search.semantic_server import QueryServer as QueryServer
    from anamnesis.search.semantic_server import serve as serve

__getattr__, __dir__ = lazy_face(__name__)
