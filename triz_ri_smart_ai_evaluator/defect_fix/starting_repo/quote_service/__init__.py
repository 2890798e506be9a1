"""The quote service: prices an order, with a bulk discount by the order's total quantity."""

from .app import create_app

__all__ = ["create_app"]
