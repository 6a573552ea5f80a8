from django.contrib import admin

from .models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "username", "action", "object_type", "object_repr")
    list_filter = ("action", "object_type")
    search_fields = ("username", "object_repr", "action")
    readonly_fields = [f.name for f in AuditEntry._meta.fields]
