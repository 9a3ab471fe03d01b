from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat.selectors import conversation_list_for_user


@require_GET
@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    conversations = conversation_list_for_user(user=request.user)
    return render(request, "chat/conversation_list.html", {"conversations": conversations})
