"""Request body parsing for the API: DRF's JSON parser, with a body nested past Python's recursion limit
answered as a 400 like any other malformed body instead of a 500."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
