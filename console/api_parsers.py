"""Request body parsing for the API: DRF's JSON parser, with a body nested past lib.bounded_json's depth
(or past Python's recursion limit) answered as a 400 like any other malformed body instead of a 500."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from lib.bounded_json import TooDeep, check_depth


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return check_depth(super().parse(stream, media_type, parser_context))
        except (RecursionError, TooDeep):
            raise ParseError(f"JSON parse error - {TooDeep()}.") from None
