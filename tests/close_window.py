"""Asks an X window to close, as a window manager's close button does (WM_DELETE_WINDOW).
Usage: /usr/bin/python3 tests/close_window.py WINDOW_ID   (needs python3-xlib)"""
import sys

from Xlib import X, display, protocol

d = display.Display()
window = d.create_resource_object("window", int(sys.argv[1]))
protocols = d.intern_atom("WM_PROTOCOLS")
delete = d.intern_atom("WM_DELETE_WINDOW")
event = protocol.event.ClientMessage(
    window=window, client_type=protocols, data=(32, [delete, X.CurrentTime, 0, 0, 0])
)
window.send_event(event, event_mask=0)
d.flush()
