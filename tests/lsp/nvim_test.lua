-- Neovim headless test of `meshc lsp` with tools/editors/nvim: opens a file, gets its
-- diagnostics and a hover, jumps to a definition, edits and sees the new diagnostics.
-- Run by tests/lsp/nvim_test.sh (environment: MESHC, MESH_FILE, MESHC_STDLIB, EDITORS).
local out = io.stdout
local failures = 0
local function check(cond, what, detail)
  out:write((cond and "ok   " or "FAIL ") .. what .. "\n")
  if not cond then
    failures = failures + 1
    if detail then out:write("     " .. vim.inspect(detail) .. "\n") end
  end
end
local function finish()
  out:write(string.format("nvim: %d failures\n", failures))
  out:flush()
  vim.cmd((failures == 0) and "qall!" or "cquit 1")
end

local ok, err = pcall(function()
  vim.opt.runtimepath:append(os.getenv("EDITORS") .. "/nvim")
  vim.cmd("filetype off")  -- again, so that ftdetect/ of the path just added is read
  vim.cmd("filetype plugin on")
  vim.cmd("syntax on")
  require("meshc").setup({ cmd = { os.getenv("MESHC"), "lsp", "--stdlib", os.getenv("MESHC_STDLIB") } })
  vim.cmd("edit " .. os.getenv("MESH_FILE"))
  local buf = vim.api.nvim_get_current_buf()
  check(vim.bo.filetype == "mesh", "filetype mesh detected for .msh")
  check(vim.b.current_syntax == "mesh", "the Vim syntax file is loaded")

  local attached = vim.wait(20000, function() return #vim.lsp.buf_get_clients(buf) > 0 end, 20)
  check(attached, "meshc lsp attached to the buffer")
  local client = vim.lsp.buf_get_clients(buf)[next(vim.lsp.buf_get_clients(buf))]

  -- The file has one error: a shape mismatch in `z @ w1 @ w1` (the rest is typed).
  local got = vim.wait(20000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
  local diags = vim.diagnostic.get(buf)
  check(got and #diags == 1 and diags[1].code == "E0307", "diagnostics on open: E0307", diags)

  -- Hover on `h @ w2`: the type with its layout and the all_reduce the checker inserted.
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local function find(needle)
    for i, l in ipairs(lines) do
      local c = l:find(needle, 1, true)
      if c then return i - 1, c - 1 end
    end
  end
  local hl, hc = find("h @ w2")
  local resp = client.request_sync("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = hl, character = hc + 2 } }, 10000, buf)
  local value = resp and resp.result and resp.result.contents and resp.result.contents.value or ""
  check(value:find("partial {model}", 1, true) and value:find("all_reduce", 1, true), "hover shows type and collective", value)

  -- Jump to the definition of `mlp` from its call.
  local cl, cc = find("mlp(x, w1, w2)")
  local dl = find("fn mlp")
  vim.api.nvim_win_set_cursor(0, { cl + 1, cc + 1 })
  vim.lsp.buf.definition()
  local jumped = vim.wait(10000, function() return vim.api.nvim_win_get_cursor(0)[1] == dl + 1 end, 20)
  check(jumped, "definition jumps to `fn mlp`", vim.api.nvim_win_get_cursor(0))

  -- Edit: fix the unknown name, then break another line; the diagnostics follow.
  local zl = find("sum(z @ w1 @ w1)")
  vim.api.nvim_buf_set_lines(buf, zl, zl + 1, false, { '    print("sum", sum(z));' })
  local cleared = vim.wait(20000, function() return #vim.diagnostic.get(buf) == 0 end, 20)
  check(cleared, "after fixing the shapes: no diagnostics", vim.diagnostic.get(buf))
  vim.api.nvim_buf_set_lines(buf, hl, hl + 1, false, { "    h @ w3" })
  local again = vim.wait(20000, function()
    local d = vim.diagnostic.get(buf)
    return #d == 1 and d[1].message:find("w3", 1, true) ~= nil
  end, 20)
  check(again, "after the edit: the new diagnostic (unknown `w3`)", vim.diagnostic.get(buf))
end)
if not ok then check(false, "the test ran without a Lua error", err) end
finish()
