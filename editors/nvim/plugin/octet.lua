-- octet.nvim commands. Nothing starts until a command runs; call
-- require("octet").setup{} to configure (see :help octet).
if vim.g.loaded_octet then
  return
end
vim.g.loaded_octet = true

local function octet()
  local m = require("octet")
  if not m.configured then
    m.setup(vim.g.octet or {})
  end
  return m
end

local command = vim.api.nvim_create_user_command

command("Octet", function(c)
  if c.args == "" then
    octet().open()
  else
    octet().send(c.args)
  end
end, { nargs = "*", desc = "octet: send a prompt (steers a running run), or open the chat" })

command("OctetChat", function()
  octet().open()
end, { desc = "octet: open the chat" })

command("OctetToggle", function()
  octet().toggle()
end, { desc = "octet: open or close the chat" })

command("OctetNew", function(c)
  octet().new_session(function(err)
    if not err then
      octet().open()
    end
  end, c.args ~= "" and c.args or nil)
end, { nargs = "*", desc = "octet: start a new session" })

command("OctetSteer", function(c)
  octet().steer(c.args)
end, { nargs = "+", desc = "octet: steer the running run" })

command("OctetFollowUp", function(c)
  octet().steer(c.args, true)
end, { nargs = "+", desc = "octet: queue a follow-up for when the run ends" })

command("OctetCancel", function()
  octet().cancel()
end, { desc = "octet: cancel the run" })

command("OctetFinishNow", function(c)
  octet().finish_now(c.args)
end, { nargs = "*", desc = "octet: finish the run without more tool calls" })

command("OctetApprovals", function()
  octet()
  require("octet.approval").show()
end, { desc = "octet: show the pending approval" })

command("OctetAgents", function()
  octet().agents()
end, { desc = "octet: list the session's subagents; stop one" })

command("OctetAsk", function(c)
  octet().ask(c.line1, c.line2, c.args)
end, { nargs = "*", range = true, desc = "octet: ask about the selected lines" })

command("OctetSessions", function()
  octet()
  require("octet.sessions").pick()
end, { desc = "octet: resume, rename, fork or delete a session" })

command("OctetModel", function()
  octet()
  require("octet.sessions").pick_model()
end, { desc = "octet: choose the session's model" })

command("OctetPolicy", function(c)
  if c.args == "" then
    octet()
    require("octet.sessions").pick_mode()
  else
    octet().set_mode(c.args)
  end
end, {
  nargs = "?",
  complete = function()
    return { "ask", "auto-read", "full" }
  end,
  desc = "octet: switch the policy mode (ask, auto-read, full)",
})

command("OctetDiff", function()
  octet()
  require("octet.review").diff()
end, { desc = "octet: review the last run's changes" })

command("OctetRewind", function()
  octet()
  require("octet.review").rewind()
end, { desc = "octet: rewind files and/or conversation to an entry" })
