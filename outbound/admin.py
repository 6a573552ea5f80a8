from django.contrib import admin

from .models import WebhookDelivery


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created", "event", "url", "status", "attempts", "response_code")
    list_filter = ("status", "event")
    search_fields = ("url", "source")
    readonly_fields = [f.name for f in WebhookDelivery._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
