def mount_console(app):
    return None
