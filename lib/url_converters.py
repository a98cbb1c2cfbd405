"""`<id:...>`: a row id in a URL, matched only while it fits a 64-bit integer.

Django's `<int:...>` takes any run of digits, and 10**40 then fails in the database (bigint out of range on
PostgreSQL, OverflowError on SQLite) as a 500. Past the largest bigint no row can have the id, so the URL
does not match and the answer is the same 404 as a missing id.
"""

BIGINT_MAX = 2**63 - 1


class IdConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > BIGINT_MAX:
            raise ValueError(f"{value} is past the largest id")  # Django reads a ValueError as no match
        return number

    def to_url(self, value: int) -> str:
        return str(value)
