-- Neovim client for `meshc lsp` (Neovim 0.7 and later, no plugins needed).
--
--   vim.opt.runtimepath:append("/path/to/meshc/tools/editors/nvim")
--   require("meshc").setup({ cmd = { "/path/to/meshc", "lsp" } })
--
-- Starts (or reuses) one server per project root for every buffer of filetype `mesh`.
-- Options: cmd (default {"meshc", "lsp"}), root_markers, init_options ({stdlib = DIR,
-- strictComm = true}), on_attach(client, bufnr), inlay_hints (Neovim 0.10+).
local M = {}

local defaults = {
  cmd = { "meshc", "lsp" },
  root_markers = { ".git", "CMakeLists.txt" },
  init_options = {},
  inlay_hints = true,
}

local function root_dir(bufnr, markers)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local dir = vim.fn.fnamemodify(path, ":p:h")
  local found = vim.fs and vim.fs.find and vim.fs.find(markers, { path = dir, upward = true })[1]
  if found then return vim.fn.fnamemodify(found, ":h") end
  return dir
end

local function default_on_attach(client, bufnr)
  local map = function(lhs, fn) vim.keymap.set("n", lhs, fn, { buffer = bufnr, silent = true }) end
  map("K", vim.lsp.buf.hover)
  map("gd", vim.lsp.buf.definition)
  map("gr", vim.lsp.buf.references)
  map("<leader>ca", vim.lsp.buf.code_action)
  if M.options.inlay_hints and vim.lsp.inlay_hint and vim.lsp.inlay_hint.enable then
    pcall(vim.lsp.inlay_hint.enable, true, { bufnr = bufnr })
  end
end

M.clients = {}  -- root -> client id

function M.start(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local opts = M.options
  local root = root_dir(bufnr, opts.root_markers)
  local config = {
    name = "meshc",
    cmd = opts.cmd,
    root_dir = root,
    init_options = opts.init_options,
    on_attach = opts.on_attach or default_on_attach,
  }
  if vim.lsp.start then  -- Neovim 0.8+
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  local id = M.clients[root]
  if not id or vim.lsp.client_is_stopped(id) then
    id = vim.lsp.start_client(config)
    M.clients[root] = id
  end
  if id then vim.lsp.buf_attach_client(bufnr, id) end
  return id
end

function M.setup(user)
  M.options = vim.tbl_deep_extend("force", defaults, user or {})
  local group = vim.api.nvim_create_augroup("meshc_lsp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = "mesh",
    callback = function(args) M.start(args.buf) end,
  })
end

return M
